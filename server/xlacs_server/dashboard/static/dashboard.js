// Keeps a page live without rendering anything twice: every few seconds it fetches the same URL from the
// server and swaps in the fresh <main id="live">; the search form just rewrites the URL and refreshes.
"use strict";
(function () {
  const seconds = Number(document.body.dataset.refreshS) || 2;
  let pending = null;

  async function refresh() {
    if (pending) return pending;
    pending = (async () => {
      try {
        const response = await fetch(location.href, {headers: {Accept: "text/html"}, cache: "no-store"});
        if (!response.ok) return;
        const fresh = new DOMParser().parseFromString(await response.text(), "text/html").getElementById("live");
        const live = document.getElementById("live");
        if (!fresh || !live) return;
        // A person who opened a <details> keeps it open across refreshes.
        const open = new Set([...live.querySelectorAll("details[open][id]")].map((d) => d.id));
        live.replaceChildren(...fresh.childNodes);
        for (const id of open) document.getElementById(id)?.setAttribute("open", "");
        document.body.dataset.refreshedAt = String(Date.now());
      } catch (error) {
        console.warn("refresh failed; retrying at the next tick", error);
      } finally {
        pending = null;
      }
    })();
    return pending;
  }

  setInterval(() => { if (!document.hidden) refresh(); }, seconds * 1000);

  for (const form of document.querySelectorAll("form[data-live]")) {
    let timer = null;
    const apply = () => {
      const params = new URLSearchParams();
      for (const [key, value] of new FormData(form)) if (value) params.set(key, value);
      const query = params.toString();
      history.replaceState(null, "", location.pathname + (query ? "?" + query : ""));
      refresh();
    };
    form.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(apply, 200); });
    form.addEventListener("submit", (event) => { event.preventDefault(); apply(); });
  }
})();
