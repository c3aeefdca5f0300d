"""The hostile-input corpus: (program, what the refusal must mention).

`{canary}` stands for a file path that must never be created.
"""

from __future__ import annotations

_REFUSED_BUILTINS = """getattr setattr delattr hasattr eval exec compile open globals locals vars dir
type object input print breakpoint help exit quit memoryview super isinstance iter next map
filter zip enumerate sorted format repr str bytes bytearray list tuple dict set callable id
hash chr ord hex divmod pow slice complex""".split()

_MODULES = "os sys numpy np subprocess shutil pathlib builtins io".split()

_TORCH_ATTRS = """load save hub ops utils from_file classes library jit compile set_default_dtype
set_default_device set_num_threads empty backends distributed multiprocessing storage
Storage autograd onnx package fx export serialization testing Tensor Generator from_numpy
frombuffer as_strided set_grad_enabled no_grad inference_mode random overrides functional
version os sys import_ir_module get_file_path nonzero unique masked_select
repeat_interleave""".split()

_TENSOR_METHODS = """numpy tofile storage untyped_storage data_ptr register_hook backward apply_ map_
share_memory_ pin_memory add_ copy_ zero_ fill_ set_ resize_ grad_fn grad data retain_grad
type to_sparse tolist new_tensor repeat_interleave nonzero unique masked_select index_put_
scatter_ as_strided""".split()

_DUNDERS = """__class__ __bases__ __subclasses__ __globals__ __dict__ __builtins__ __reduce__
__reduce_ex__ __getattribute__ __init__ __self__ __module__ __spec__ __loader__ __code__
__closure__ __mro__ __base__ __call__ __setattr__""".split()

_HAND: list[tuple[str, str]] = [
    # escapes through dunders
    ("().__class__.__bases__[0].__subclasses__()", r"starting with _ .*\(\(\)\.__class__\)"),
    ("(1).__class__.__base__.__subclasses__()", r"starting with _"),
    ("''.__class__.__mro__[1].__subclasses__()", r"starting with _"),
    ("torch.ones(1).__reduce_ex__(2)", r"starting with _"),
    ("custom.square.__globals__['torch']", r"starting with _"),
    ("torch.exp.__self__", r"starting with _"),
    ("x.T.__init__.__globals__['os'].system('touch {canary}')", r"starting with _"),
    ("__builtins__", r"names starting with _"),
    ("__import__('os').system('touch {canary}')", r"names starting with _"),
    ("_ = 1\ntorch.ones(1)", r"names starting with _"),
    ("__name__", r"names starting with _"),
    ("torch.__dict__['load']('{canary}')", r"starting with _"),
    ("x.shape.__class__", r"starting with _"),
    ("torch.max(x, 0).__class__", r"starting with _"),
    ("torch.float32.__class__", r"starting with _"),
    ("torch.cuda.is_available.__globals__", r"starting with _"),
    ("x.device.__reduce__()", r"starting with _"),
    # format strings
    ("'{0.__class__}'.format(x)", r"format is not allowed"),
    ("'%s' % x", r"strings are only used as arguments"),
    ("f'{x.__class__}'", r"f-strings are not allowed"),
    ("'{}'.format", r"format is not allowed"),
    ("'a'.join(['b'])", r"join is not on the allow-list"),
    ("'a' * 10**9", r"strings are only used as arguments"),
    ("s = 'a'\nfor i in range(100):\n    s = s + s\ntorch.ones(1)", r"strings are only used as arguments"),
    # unicode look-alikes
    ("t\u043erch.load('{canary}')", r"U\+043E"),
    ("t\u03bfrch.ones(1)", r"U\+03BF"),
    ("\uff4f\uff53.system('touch {canary}')", r"os is not available"),
    ("\uff3f\uff3fimport\uff3f\uff3f('os')", r"invalid character '\uff3f' \(U\+FF3F\)"),
    ("\uff45\uff56\uff41\uff4c('1')", r"eval\(\) is not allowed"),
    ("\U0001d428\U0001d42c.system('x')", r"os is not available"),
    ("torch.\uff4c\uff4f\uff41\uff44('{canary}')", r"torch.load is not allowed"),
    ("x.\uff3f\uff3fclass\uff3f\uff3f", r"invalid character '\uff3f' \(U\+FF3F\)"),
    ("x = torch.ones(1)\nx\u200b = x\nx", r"invalid non-printable|syntax error"),
    # attribute chains on torch towards os
    ("torch.serialization.os.system('touch {canary}')", r"torch.serialization is not on the allow-list"),
    ("torch.nn.functional.torch.load('{canary}')", r"torch.nn.functional.torch is not on the allow-list"),
    ("F.torch.save(x, '{canary}')", r"F.torch is not on the allow-list"),
    ("torch.nn.modules.module.torch.load('{canary}')", r"torch.nn.modules is not on the allow-list"),
    ("torch.cuda.os", r"torch.cuda.os is not"),
    ("torch.nn.Module", r"torch.nn.Module is not on the allow-list"),
    ("torch.cuda.set_device(0)", r"torch.cuda.set_device is not on the allow-list"),
    ("t = torch\nt.load('{canary}')", r"t.load is not allowed"),
    ("t = torch.nn\nt.functional.torch", r"functional.torch is not on the allow-list"),
    ("t = torch.nn\nt.modules", r"t.modules is not on the allow-list"),
    ("t = torch\nt.nn.functional.relu(x)", None),  # allowed: a namespace in a variable stays checked
    ("torch.version.cuda", r"torch.version is not on the allow-list"),
    ("F._VF", r"starting with _"),
    ("torch._C._get_tracing_state()", r"starting with _"),
    # statements and syntax outside the language
    ("import os\ntorch.ones(1)", r"import is not allowed"),
    ("from os import system\ntorch.ones(1)", r"import is not allowed"),
    ("(lambda: 0)()", r"lambda is not allowed"),
    ("def f():\n    return 1\ntorch.ones(1)", r"def is not allowed"),
    ("class A:\n    pass\ntorch.ones(1)", r"class is not allowed"),
    ("async def f():\n    pass\ntorch.ones(1)", r"def is not allowed"),
    ("[i for i in range(3)]", r"comprehensions are not allowed"),
    ("{i for i in range(3)}", r"comprehensions are not allowed"),
    ("{i: i for i in range(3)}", r"comprehensions are not allowed"),
    ("sum(i for i in range(3))", r"comprehensions are not allowed"),
    ("while True:\n    pass\ntorch.ones(1)", r"while loops are not allowed"),
    ("with open('{canary}', 'w') as f:\n    pass\ntorch.ones(1)", r"with is not allowed"),
    ("global x\ntorch.ones(1)", r"global is not allowed"),
    ("*a, = [1, 2]\ntorch.ones(1)", r"\* unpacking is not allowed"),
    ("torch.ones(*[2, 3])", r"\* unpacking is not allowed"),
    ("torch.ones(2, **{'dtype': torch.float64})", r"\*\* unpacking|dict literals"),
    ("{}", r"dict literals are not allowed"),
    ("{1}", r"set literals are not allowed"),
    ("if True:\n    y = 1\ntorch.ones(1)", r"if statements are not allowed"),
    ("x and x", r"and/or are not allowed"),
    ("(y := torch.ones(1))", r":= operator is not allowed"),
    ("del x\ntorch.ones(1)", r"del is not allowed"),
    ("try:\n    y = 1\nexcept Exception:\n    y = 2\ntorch.ones(1)", r"try is not allowed"),
    ("raise ValueError\ntorch.ones(1)", r"raise is not allowed"),
    ("assert False\ntorch.ones(1)", r"assert is not allowed"),
    ("return x", r"return is not allowed|syntax error"),
    ("x << 2", r"<< is not allowed"),
    ("x >> 2", r">> is not allowed"),
    ("a: int = 1\ntorch.ones(1)", r"annotated assignments are not allowed"),
    ("x is None", r"only == != < <= > >= comparisons"),
    ("1 in [1]", r"only == != < <= > >= comparisons"),
    ("0 < x < 1", r"chained comparisons"),
    ("x.T = 1\nx", r"only names can be assigned"),
    ("x[0] = 1\nx", r"only names can be assigned"),
    ("a = b = torch.ones(1)\na", r"chained assignment"),
    ("for i in range(2):\n    y = 1\nelse:\n    y = 2\ntorch.ones(1)", r"for \.\.\. else is not allowed"),
    ("for i in [1, 2]:\n    y = i\ntorch.ones(1)", r"a loop must be `for i in range\(N\):`"),
    ("for x.T in range(2):\n    y = 1\ntorch.ones(1)", r"loop variable must be a plain name"),
    ("b'bytes'", r"bytes literals are not allowed"),
    ("match x:\n    case _:\n        y = 1\ntorch.ones(1)", r"Match is not part of the expression language"),
    ("x.add_(1)", r"x.add_ is not on the allow-list"),
    ("torch.add(x, x, out=x)", r"out= is not allowed"),
    ("F.relu(x, inplace=True)", r"inplace= is not allowed"),
    ("y = torch.ones(1)\n" + "-" * 45 + "y", None),  # deep but within the limits: evaluates
    ("range(10)", r"range\(\.\.\.\) can only be used as `for i in range\(N\):`"),
    ("r = range\ntorch.ones(1)", r"range is a function: call it"),
    ("x()", r"x\(\.\.\.\) is not an allowed function"),
    ("torch.exp(x)(1)", r"only named functions can be called"),
    ("x[0]()", r"only named functions can be called"),
    ("torch.ones(1) if x else x", r"failed: Boolean value of Tensor with more than one value is ambiguous"),
    ("q = q + 1\nq", r"q is not defined"),
    ("a = a\na", r"a is not defined"),
    ("torch = 1\ntorch", r"torch is a built-in name and cannot be assigned"),
    ("F = x\nF", r"F is a built-in name"),
    ("range = 3\nx", r"range is a built-in name"),
    ("x.to('meta')", r"device must be 'cpu', 'cuda' or 'cuda:N', found 'meta'"),
    ("torch.device('mps')", r"device must be 'cpu', 'cuda' or 'cuda:N', found 'mps'"),
    ("torch.manual_seed(torch.ones(1))", r"torch.manual_seed takes one whole number"),
    ("torch.tensor('abc')", r"torch.tensor\(\.\.\.\) failed"),
    ("x.dtype.to_complex()", r"to_complex is not on the allow-list"),
    ("torch.max(x, 0).values.grad_fn.next_functions", r"grad_fn is not allowed"),
    ("torch.ones(1).apply_(print)", r"apply_ is not"),
    ("x.register_hook(print)", r"register_hook is not allowed"),
    ("torch.manual_seed(0)", r"the last line must give a tensor .* found NoneType"),
    ("x = torch.ones(1)", r"a program ends with the expression to show"),
    ("", r"a program ends with the expression to show"),
    ("   \n  ", r"a program ends with the expression to show"),
    ("\x00", r"syntax error|null"),
    # memory bombs
    ("torch.randn(int(3e10))", r"30,000,000,000 elements"),
    ("torch.zeros(10**9)", r"1,000,000,000 elements"),
    ("torch.ones(10**5, 10**5)", r"10,000,000,000 elements"),
    ("torch.empty(10**10)", r"torch.empty is not allowed: it returns uninitialized memory"),
    ("torch.full((10**10,), 1.0)", r"10,000,000,000 elements"),
    ("torch.arange(1e12)", r"1,000,000,000,000 elements"),
    ("torch.linspace(0, 1, 10**10)", r"10,000,000,000 elements"),
    ("torch.eye(10**6)", r"1,000,000,000,000 elements"),
    ("torch.rand(10**4, 10**4)", r"100,000,000 elements"),
    ("torch.randint(0, 2, (10**10,))", r"10,000,000,000 elements"),
    ("torch.randperm(10**10)", r"10,000,000,000 elements"),
    ("torch.ones(3).expand(10**6, 10**6, 3)", r"elements"),
    ("torch.ones(3).repeat(10**9)", r"3,000,000,000 elements"),
    ("torch.ones(10**3).outer(torch.ones(10**5))", r"100,000,000 elements"),
    ("torch.kron(torch.ones(10**4), torch.ones(10**4))", r"100,000,000 elements"),
    ("torch.ones(10**4, 1) * torch.ones(1, 10**4)", r"100,000,000 elements"),
    ("torch.ones(3000, 300) @ torch.ones(300, 10**4)", r"30,000,000 elements"),
    ("F.one_hot(torch.arange(10**4), 10**4)", r"100,000,000 elements"),
    ("F.one_hot(torch.tensor([10**9]))", r"F.one_hot\(...\) would create a tensor of 1,000,000,001 elements"),
    ("torch.arange(0, 10**10, 1e-300)", r"would create a tensor of unbounded size"),
    ("torch.arange(0, float('inf'))", r"would create a tensor of unbounded size"),
    ("F.pad(torch.ones(1), (10**9, 0))", r"1,000,000,001 elements"),
    ("torch.tensor([[0]*10**4]*10**4)", r"nested lists|100,000,000 elements"),
    ("a = [1]\nfor i in range(999):\n    a = [a, a]\ntorch.tensor(a)",
     r"the list \[a, a\] would hold [\d,]+ items once its inner lists are counted"),
    ("[0]*10**9", r"list of 1,000,000,000 items"),
    ("l = [1]\nfor i in range(100):\n    l = l + l\ntorch.ones(1)", r"list of 131,072 items"),
    ("y = torch.ones(10**7)\nz = y * 2\nz * 2", r"bytes in all"),
    ("y = torch.ones(2)\nfor i in range(40):\n    y = torch.cat([y, y])\ny", r"elements|bytes in all"),
    ("y = torch.ones(1)\nfor i in range(1000):\n    y = torch.stack([y, y])\ny", r"elements|bytes in all"),
    ("torch.ones(10**6).new_zeros(10**10)", r"10,000,000,000 elements"),
    ("torch.ones(1).tile(10**9)", r"1,000,000,000 elements"),
    ("F.interpolate(torch.ones(1, 1, 10), scale_factor=1e8)", r"elements"),
    ("torch.cdist(torch.ones(10**4, 1), torch.ones(10**5, 1))", r"1,000,000,000 elements"),
    ("torch.cartesian_prod(torch.ones(10**4), torch.ones(10**4))", r"200,000,000 elements"),
    ("torch.ones(10**4).diag()", r"100,000,000 elements"),
    ("torch.block_diag(torch.ones(10**4, 1), torch.ones(1, 10**4))", r"elements"),
    ("x[[[0]*10**4]*10**4]", r"nested lists|elements"),
    ("torch.ones(10**4, 10**3).chunk(10**9)", r"asks for 1,000,000,000 pieces; at most 10,000"),
    ("torch.chunk(torch.ones(10**6), 10**6)", r"asks for 1,000,000 pieces; at most 10,000"),
    # huge numbers
    ("10**10**10", r"integer beyond 64 bits"),
    ("2**64", r"integer beyond 64 bits"),
    ("9**999999", r"integer beyond 64 bits"),
    ("(10**18) * (10**18)", r"integer beyond 64 bits"),
    ("n = 2**62\nn + n + n", r"64 bits"),
    ("2.0**99999", r"number too large"),
    ("int(1e300)", r"64 bits"),
    ("int('9' * 4000)", r"strings are only used as arguments"),
    ("1" + "0" * 5000, r"integer literal|Exceeds the limit"),
    ("10.0**400", r"number too large"),
    # deep nesting and size
    ("-" * 9000 + "1", r"nests too deeply|nests deeper|syntax error"),
    ("(" * 500 + ")" * 500, r"too many nested parentheses"),
    ("[" * 300 + "]" * 300, r"too many nested parentheses"),
    ("x" + ".T" * 100, r"nests deeper than 50 levels"),
    ("abs(" * 100 + "1" + ")" * 100, r"nests deeper than 50 levels"),
    ("x" + "+x" * 3000, r"nests too deeply|nests deeper|syntax error"),
    ("x" + "[0]" * 200, r"nests deeper than 50 levels"),
    ("x" * 20000, r"characters long; the limit is 10,000 \(Limits.max_source_chars\)"),
    ("y=1\n" * 1300 + "x", r"more than 5,000 syntax nodes"),
    # long loops
    ("for i in range(10**9):\n    y = 1\nx", r"limit is 1,000|iterations"),
    ("for i in range(1001):\n    y = 1\nx", r"runs 1,001 times"),
    ("for i in range(100):\n    for j in range(100):\n        y = 1\nx", r"10,100 iterations in all|iterations in all"),
    ("n = 10**6\nfor i in range(n):\n    y = 1\nx", r"1,000,000 iterations in all"),
    ("for i in range(10**9, 0, -1):\n    y = 1\nx", r"limit is 1,000"),
    ("for i in range(2**62):\n    y = 1\nx", r"limit is 1,000"),
    ("for i in range(0.5):\n    y = 1\nx", r"range\(\) needs whole numbers"),
    ("for i in range(1, 2, 0):\n    y = 1\nx", r"range\(\.\.\.\) is invalid"),
]


def corpus() -> list[tuple[str, str | None]]:
    """All hostile cases; the program's first line defines x, so names resolve."""
    cases = list(_HAND)
    cases += [(f"{name}('{{canary}}')", rf"{name}\(\) is not allowed") for name in _REFUSED_BUILTINS]
    cases += [(f"{m}.system('touch {{canary}}')", rf"{m} is not available") for m in _MODULES]
    cases += [(f"torch.{a}('{{canary}}')", rf"torch\.{a} is not") for a in _TORCH_ATTRS]
    cases += [(f"x.{m}()", rf"x\.{m} is not") for m in _TENSOR_METHODS]
    cases += [(f"x.{d}", r"starting with _") for d in _DUNDERS]
    cases += [(f"torch.{d}", r"starting with _") for d in _DUNDERS]
    return cases
