"""SavedModel directories, read without TensorFlow: a signature frozen into a GraphDef (loader, freeze), the
TensorBundle of its variables (bundle, table), and the executable compiled from it (executable)."""
from xlacs.saved_model.bundle import Bundle, BundleError
from xlacs.saved_model.executable import (InvalidInput, SignatureExecutable, check_inputs, compile_saved_model,
                                          compile_signature)
from xlacs.saved_model.loader import DEFAULT_SIGNATURE, SavedModel, SavedModelError, Signature, TensorSpec

__all__ = ["Bundle", "BundleError", "DEFAULT_SIGNATURE", "InvalidInput", "SavedModel", "SavedModelError", "Signature",
           "SignatureExecutable", "TensorSpec", "check_inputs", "compile_saved_model", "compile_signature"]
