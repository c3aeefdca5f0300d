"""What a program may name: the allow-listed functions, methods and attributes.

Pure data, no torch import, so `validate` can run where torch is not loaded.
Each callable carries a *growth* class that tells the evaluator how to check
its output size before running it:

- ``same``: the output has at most as many elements as the largest input
  (unary math, reductions, views, dtype and device moves); nothing to check.
- ``broadcast``: elementwise over broadcast inputs; the output shape is the
  broadcast of the tensor arguments' shapes.
- ``meta``: anything else (matmul, cat, repeat, conv, ...); run first on
  torch's ``meta`` device, which computes shapes without allocating memory.
- ``ctor``: a tensor constructor; run on ``meta`` first, and given the
  program's default device and dtype when it names none.
"""

from __future__ import annotations

__all__ = [
    "NAMESPACES",
    "TORCH_FUNCTIONS",
    "TORCH_CONSTANTS",
    "F_FUNCTIONS",
    "CUSTOM_FUNCTIONS",
    "NN_MODULES",
    "MODULE_ATTRIBUTES",
    "TENSOR_METHODS",
    "TENSOR_PROPERTIES",
    "VALUE_ATTRIBUTES",
    "BUILTIN_FUNCTIONS",
    "RESERVED_NAMES",
    "REFUSED_MODULES",
    "ALL_ATTRIBUTES",
    "refusal_reason",
]


def _table(**groups: str) -> dict[str, str]:
    return {name: growth for growth, names in groups.items() for name in names.split()}


_UNARY = """
    abs absolute acos arccos acosh arccosh asin arcsin asinh arcsinh atan arctan atanh
    arctanh ceil cos cosh deg2rad rad2deg erf erfc erfinv exp exp2 expm1 floor frac
    lgamma digamma log log10 log1p log2 logit neg negative nan_to_num reciprocal relu
    round rsqrt sigmoid sign sgn sin sinc sinh sqrt square tan tanh trunc fix isnan
    isinf isfinite isposinf isneginf logical_not signbit clamp_min clamp_max positive
"""
_SHAPE_KEEPING = """
    softmax log_softmax cumsum cumprod cummax cummin logcumsumexp flip fliplr flipud
    roll rot90 transpose swapaxes swapdims t permute movedim moveaxis squeeze unsqueeze
    flatten reshape narrow select diagonal tril triu trace
    sum nansum mean nanmean prod max min amax amin aminmax argmax argmin norm logsumexp
    std var std_mean var_mean median nanmedian mode all any count_nonzero dot vdot sort
    argsort topk kthvalue msort numel chunk detach clone
    is_floating_point is_complex allclose equal
"""
_ELEMENTWISE = """
    add sub subtract mul multiply div divide true_divide floor_divide remainder fmod pow
    float_power atan2 arctan2 maximum minimum fmax fmin where clamp clip lerp hypot eq ne
    lt le gt ge greater less greater_equal less_equal not_equal logical_and logical_or
    logical_xor bitwise_and bitwise_or bitwise_xor isclose xlogy copysign heaviside
    masked_fill addcmul addcdiv
"""
_GROWING = """
    matmul mm bmm mv outer ger kron tensordot inner diag diag_embed diagflat broadcast_to
    tile index_select gather take_along_dim cross
"""

TORCH_FUNCTIONS: dict[str, str] = _table(
    same=_UNARY
    + _SHAPE_KEEPING
    + "zeros_like ones_like full_like rand_like randn_like randint_like",
    broadcast=_ELEMENTWISE,
    meta=_GROWING
    + """einsum cat concat concatenate stack hstack vstack dstack column_stack cdist
    cartesian_prod block_diag atleast_1d atleast_2d atleast_3d""",
    ctor="tensor arange linspace logspace zeros ones full eye rand randn randint randperm",
    special="manual_seed device",
)

# Plain values reachable as torch.<name>.
TORCH_CONSTANTS: frozenset[str] = frozenset(
    """float32 float64 float16 bfloat16 float double half int64 int32 int16 int8 uint8
    long int short bool complex64 complex128 pi e inf nan""".split()
)

F_FUNCTIONS: dict[str, str] = _table(
    same="""relu relu6 leaky_relu elu selu celu gelu silu mish softplus softsign tanh sigmoid
    hardtanh hardsigmoid hardswish logsigmoid tanhshrink softshrink hardshrink softmax
    log_softmax softmin normalize dropout alpha_dropout layer_norm group_norm batch_norm
    instance_norm rms_norm glu nll_loss cross_entropy""",
    broadcast="""mse_loss l1_loss smooth_l1_loss huber_loss binary_cross_entropy
    binary_cross_entropy_with_logits kl_div soft_margin_loss cosine_similarity
    pairwise_distance""",
    meta="""linear bilinear conv1d conv2d max_pool1d max_pool2d avg_pool1d avg_pool2d
    adaptive_avg_pool1d adaptive_avg_pool2d one_hot pad embedding interpolate""",
)

# Demonstration autograd Functions, see graphviz_app.expr.custom.
CUSTOM_FUNCTIONS: dict[str, str] = _table(
    same="square square_wrong_backward cube cube_wrong_backward"
)

_NOT_METHODS = {"std_mean", "var_mean", "tensordot"}  # torch functions only

TENSOR_METHODS: dict[str, str] = {
    name: growth
    for name, growth in _table(
        same=_UNARY
        + _SHAPE_KEEPING
        + """to cuda cpu double float half bfloat16 long int bool short type_as contiguous
        requires_grad_ item dim size nelement element_size view view_as reshape_as unflatten""",
        broadcast=_ELEMENTWISE,
        meta=_GROWING + "expand expand_as repeat new_zeros new_ones new_full",
    ).items()
    if name not in _NOT_METHODS
}

TENSOR_PROPERTIES: frozenset[str] = frozenset(
    "T mT shape dtype device requires_grad is_leaf ndim is_cuda".split()
)

# Attributes of the few non-tensor values a program can hold.
VALUE_ATTRIBUTES: dict[str, frozenset[str]] = {
    "device": frozenset({"type", "index"}),
    "dtype": frozenset({"is_floating_point", "is_complex", "itemsize"}),
    "return_types": frozenset({"values", "indices"}),
}

# Python built-ins a program may call (range only as `for i in range(N):`).
BUILTIN_FUNCTIONS: frozenset[str] = frozenset(
    "int float bool len abs min max round range".split()
)

# Module constructors reachable as nn.<name> / torch.nn.<name>, by how their
# parameters are sized before they are allocated (graphviz_app.expr.modules):
# ``layer`` modules are built on ``meta`` first and take the program's device
# and dtype; ``plain`` ones hold no parameters; ``container`` ones hold modules
# the program already built (shared, not copied); ``copies`` deep-copies one
# (TransformerEncoder copies encoder_layer num_layers times).
NN_MODULES: dict[str, str] = _table(
    layer="""Linear Conv2d LayerNorm BatchNorm1d BatchNorm2d Embedding MultiheadAttention
    TransformerEncoderLayer LSTM GRU""",
    plain="ReLU GELU Tanh Dropout",
    container="Sequential ModuleList",
    copies="TransformerEncoder",
)

# The only attributes of a module a program may read: its own tensors, for
# weight tying (`h @ emb.weight.T`). Hooks, buffers, state dicts, `apply`,
# `to`, `train`/`eval` and everything else stay out of reach.
MODULE_ATTRIBUTES: frozenset[str] = frozenset({"weight", "bias"})

# namespace path -> table of what it holds; "torch.cuda" is tiny.
NAMESPACES: dict[str, frozenset[str]] = {
    "torch": frozenset(TORCH_FUNCTIONS) | TORCH_CONSTANTS | {"nn", "cuda", "autograd"},
    "torch.nn": frozenset(NN_MODULES) | {"functional"},
    "torch.nn.functional": frozenset(F_FUNCTIONS),
    "nn": frozenset(NN_MODULES) | {"functional"},
    "nn.functional": frozenset(F_FUNCTIONS),
    "F": frozenset(F_FUNCTIONS),
    "torch.cuda": frozenset({"is_available", "device_count"}),
    "custom": frozenset(CUSTOM_FUNCTIONS),
    # A gradient the program goes on computing with (graphviz_app.expr.autograd_grad).
    "torch.autograd": frozenset({"grad"}),
}

# Names a program can read but never assign.
RESERVED_NAMES: frozenset[str] = frozenset({"torch", "F", "custom", "nn"}) | BUILTIN_FUNCTIONS

ALL_ATTRIBUTES: frozenset[str] = (
    frozenset(TENSOR_METHODS)
    | TENSOR_PROPERTIES
    | frozenset().union(*VALUE_ATTRIBUTES.values())
    | MODULE_ATTRIBUTES
    | frozenset().union(*NAMESPACES.values())
)

_WHY = {
    "load": "it unpickles a file, which can run arbitrary code",
    "save": "it writes files",
    "from_file": "it reads files",
    "hub": "it downloads and runs code",
    "ops": "it reaches torch's raw operator registry",
    "classes": "it reaches torch's raw class registry",
    "library": "it registers new operators",
    "utils": "it reaches utilities that load files and run code",
    "jit": "it compiles and loads code",
    "compile": "it compiles code",
    "empty": "it returns uninitialized memory; use torch.zeros",
    "set_default_dtype": "it changes global state; pass dtype= to a constructor instead",
    "set_default_device": "it changes global state; pass device= to a constructor instead",
    "set_num_threads": "it changes global state",
    "register_hook": "hooks run Python functions",
    "backward": "the page or the CLI runs backward for you",
    "numpy": "numpy is not part of the language",
    "grad_fn": "autograd internals are shown in the drawn graph, not in expressions",
}
REFUSED_MODULES: frozenset[str] = frozenset(
    {"os", "sys", "numpy", "np", "subprocess", "shutil", "pathlib", "builtins", "io", "importlib", "pickle", "socket"}
)
_BUILTINS_REFUSED = {
    "getattr", "setattr", "delattr", "hasattr", "open", "eval", "exec", "compile",
    "__import__", "globals", "locals", "vars", "dir", "type", "object", "input", "print",
    "breakpoint", "help", "exit", "quit", "memoryview", "super", "classmethod",
    "staticmethod", "property", "isinstance", "issubclass", "iter", "next", "map",
    "filter", "zip", "enumerate", "sorted", "reversed", "format", "repr", "str", "bytes",
    "bytearray", "list", "tuple", "dict", "set", "frozenset", "callable", "id", "hash",
    "chr", "ord", "hex", "oct", "bin", "divmod", "pow", "slice", "complex", "all", "any",
}


def refusal_reason(name: str) -> str | None:
    """Why a known-dangerous name or attribute is refused, or None if not special.

    >>> refusal_reason("load")
    'it unpickles a file, which can run arbitrary code'
    """
    if name in _WHY:
        return _WHY[name]
    if name in REFUSED_MODULES:
        return "expressions cannot reach modules other than torch"
    if name in _BUILTINS_REFUSED:
        return "expressions can only call the allow-listed tensor functions"
    return None
