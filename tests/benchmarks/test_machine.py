"""The benchmark names the CPU it ran on closely enough to tell apart the machines of one kind: name, family and
model, and the vector extensions the engines' kernels depend on."""
import pathlib

from benchmarks import machine

FLAGS = "fpu sse2 avx2 fma"
INTEL_AMX = (f"processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
             f"model name\t: Intel(R) Xeon(R) Processor\nflags\t\t: {FLAGS} avx512f avx512_vnni avx512_bf16 amx_tile\n"
             f"\nprocessor\t: 1\nmodel name\t: another\nflags\t\t: {FLAGS}\n")
EPYC_AVX2 = f"processor\t: 0\ncpu family\t: 23\nmodel\t\t: 49\nmodel name\t: AMD EPYC\nflags\t\t: {FLAGS}\n"


def test_the_cpu_is_named_with_family_model_and_vector_extensions():
    assert machine._cpu(INTEL_AMX) == ("Intel(R) Xeon(R) Processor (family 6, model 143), AVX2, AVX-512, "
                                       "AVX-512 VNNI, AVX-512 BF16, AMX")
    assert machine._cpu(EPYC_AVX2) == "AMD EPYC (family 23, model 49), AVX2"
    assert machine._cpu("processor\t: 0\nflags\t\t: fpu sse2\n").endswith(", no AVX2")


def test_this_machine_is_described_with_its_cpu():
    described = machine.describe(pathlib.Path(__file__).parents[2])
    assert described["cpu"] == machine._cpu(pathlib.Path("/proc/cpuinfo").read_text())
    assert described["cores"] >= 1
