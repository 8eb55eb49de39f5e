"""A recorded operator call made again (``runtime.replay``): its arguments rebuilt from what torch.profiler recorded
with ``record_shapes`` (dtypes, shapes, strides, scalars: ``parse.kineto_ops``) over fresh random storage, fitted to
one of the operator's overloads, and called; calls that may crash the process (a host-read integer tensor made on the
GPU) are held to the end of the list (``in_safe_order``)."""
from __future__ import annotations

import ast


# The C++ type names torch.profiler writes in "Input type" (caffe2 TypeMeta names), as seen in torch 2.13
# traces: one tensor of each dtype recorded with record_shapes=True.
DTYPE_NAMES = {
    "float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
    "signed char": "int8", "unsigned char": "uint8", "short int": "int16", "int": "int32", "long int": "int64",
    "bool": "bool", "c10::complex<float>": "complex64", "c10::complex<double>": "complex128",
    "c10::complex<c10::Half>": "complex32", "c10::Float8_e4m3fn": "float8_e4m3fn", "c10::Float8_e5m2": "float8_e5m2",
    "c10::Float8_e4m3fnuz": "float8_e4m3fnuz", "c10::Float8_e5m2fnuz": "float8_e5m2fnuz",
    "short unsigned int": "uint16", "unsigned int": "uint32", "long unsigned int": "uint64",
}
# ScalarType arguments (dtype=, out_dtype=) are recorded as their enum value (c10/core/ScalarType.h order;
# seen: float16 as "5", float32 as "6", float64 as "7" in torch 2.13 traces).
SCALAR_TYPES = ["uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex32", "complex64",
                "complex128", "bool", "qint8", "quint8", "qint32", "bfloat16", "quint4x2", "quint2x4", "bits1x8",
                "bits2x4", "bits4x2", "bits8", "bits16", "float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz",
                "float8_e4m3fnuz"]


# Tensor arguments the operator reads on the host (``.data_ptr()`` dereferenced in C++), by schema argument name: the
# program passes them as CPU tensors, which the trace does not say (it records no device). Seen: H100, torch 2.11, a
# transformers Trainer fine-tune (BERT, fp32 SDPA with dropout): ``aten::_efficient_attention_backward``'s 0-dim int64
# ``philox_seed``/``philox_offset``, made on the GPU by the replay, crashed it with a segmentation fault (without ncu
# too), and the 7 calls listed after it went unmeasured (benchmarks/probes/gpu_trainer_replay_probe.sh, reports/window
# call18). They are tried on the host first: an operator that wants them on the GPU refuses with an error, not a crash
# (seen: H100, torch 2.11, the torch.compile loop's ``aten::_cudnn_attention_backward``: "Expected all tensors to be on
# the same device, but got philox_seed is on cpu", reports/window call22), and is called again with them there.
HOST_TENSOR_ARGUMENTS = frozenset({"philox_seed", "philox_offset"})


class CannotRebuild(Exception):
    """The recorded call lacks something needed to make it again (a tensor list, a string argument...)."""


def _concrete(text: str):
    """A recorded scalar or list: "1" -> 1, "0." -> 0.0, "True" -> True, "[2, 2]" -> [2, 2]."""
    text = text.strip()
    if text == "":
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        if text in ("inf", "-inf", "nan"):
            return float(text)
        raise CannotRebuild(f"unreadable recorded value {text!r}") from None


def _storage_size(dims: list[int], strides: list[int]) -> int:
    if any(d == 0 for d in dims):
        return 0
    return 1 + sum((d - 1) * abs(s) for d, s in zip(dims, strides))


def make_tensor(torch, dtype_name: str, dims: list[int], strides: list[int] | None, device):
    """A tensor of the recorded dtype, shape and strides (views with zero or overlapping strides included)
    over fresh storage: random normal values for floating types, zeros otherwise (indices stay in range)."""
    dtype = getattr(torch, DTYPE_NAMES[dtype_name])
    dims = [int(d) for d in dims]
    strides = [int(s) for s in strides] if strides and len(strides) == len(dims) else None
    if strides is None:
        strides = list(torch.empty(dims, device="meta").stride()) if dims else []
    n = _storage_size(dims, strides)
    if dtype.is_floating_point or dtype.is_complex:
        flat = torch.randn(n, device=device, dtype=torch.float32).to(dtype)
    else:
        flat = torch.zeros(n, device=device, dtype=dtype)
    return flat.as_strided(dims, strides)


def rebuild(torch, call: dict, device) -> list:
    """The recorded arguments, in order, as values to pass: tensors, scalars, lists, None."""
    out = []
    types, dims, strides, concrete = call["types"], call["dims"], call["strides"], call["concrete"]
    for i, t in enumerate(types):
        d = dims[i] if i < len(dims) else []
        s = strides[i] if i < len(strides) else []
        c = concrete[i] if i < len(concrete) else ""
        if t in DTYPE_NAMES:
            out.append(make_tensor(torch, t, d, s, device))
        elif t in ("Scalar", "ScalarList", ""):
            # "" with no value: None, or a value the profiler does not record (a string): the call may fail
            out.append(_concrete(c))
        else:
            raise CannotRebuild(f"argument {i} is a {t}")
    return out


def _fit(torch, schema, values: list, host: bool = True):
    """Positional and keyword arguments for ``schema`` from the recorded values, or None if they cannot be
    its arguments (count; ScalarType given as its number), and whether a ``HOST_TENSOR_ARGUMENTS`` tensor was put
    on the host (``host``)."""
    args = schema.arguments
    if len(args) != len(values):
        return None
    pos, kw = [], {}
    moved = False
    for a, v in zip(args, values):
        kind = str(a.type)
        if host and a.name in HOST_TENSOR_ARGUMENTS and isinstance(v, torch.Tensor) and v.dim() == 0:
            v, moved = torch.zeros((), dtype=v.dtype), True  # a seed or offset of 0, on the host
        if "ScalarType" in kind and isinstance(v, int) and not isinstance(v, bool):
            if not 0 <= v < len(SCALAR_TYPES) or not hasattr(torch, SCALAR_TYPES[v]):
                return None
            v = getattr(torch, SCALAR_TYPES[v])
        if a.kwarg_only:
            kw[a.name] = v
        else:
            pos.append(v)
    return pos, kw, moved


def prepare(torch, call: dict, device):
    """The operator and its rebuilt arguments (tensors made, and filled, here: outside the profiled range)."""
    ns, _, name = call["name"].partition("::")
    if not name or ns not in ("aten",):
        raise CannotRebuild(f"{call['name']}: not an aten operator")
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        raise CannotRebuild(f"{call['name']}: no such operator in this torch")
    return packet, rebuild(torch, call, device)


def call_op(torch, call: dict, device, prepared=None, around=None) -> str:
    """Call the recorded operator once; returns the overload that accepted the arguments. Raises
    ``CannotRebuild`` (or the operator's own error) when it cannot be called. ``around``: a context manager
    factory put around each attempt (the profiled range)."""
    import contextlib
    packet, values = prepared or prepare(torch, call, device)
    around = around or contextlib.nullcontext
    last: Exception | None = None
    for overload in packet.overloads():
        op = getattr(packet, overload)
        for host in (True, False):  # seeds on the host first, then where the other tensors are
            fitted = _fit(torch, op._schema, values, host)
            if fitted is None:
                break
            try:
                with around():
                    op(*fitted[0], **fitted[1])
                return overload
            except Exception as exc:  # another placement or overload may take these arguments
                last = exc
                if not fitted[2]:
                    break
    raise last or CannotRebuild(f"{call['name']}: no overload takes {len(values)} arguments")


def risky(torch, call: dict) -> bool:
    """A call with a 0-dim integer tensor argument that ``HOST_TENSOR_ARGUMENTS`` does not name (by the operator's
    schema): a seed, an offset or a count the operator may read on the host, where the replay's GPU tensor would
    crash the process and every call after it would be lost. Such calls are made after the others
    (``in_safe_order``). An operator this torch does not have cannot be called at all: not risky."""
    ints = [i for i, t in enumerate(call["types"])
            if t in _INTEGER_TYPES and not (call["dims"][i] if i < len(call["dims"]) else [])]
    ns, _, name = call["name"].partition("::")
    packet = getattr(torch.ops.aten, name, None) if ints and ns == "aten" else None
    if packet is None:
        return False
    for overload in packet.overloads():
        args = getattr(packet, overload)._schema.arguments
        if len(args) == len(call["types"]):
            return any(args[i].name not in HOST_TENSOR_ARGUMENTS for i in ints)
    return False


_INTEGER_TYPES = frozenset({"long int", "int", "short int", "signed char", "unsigned char", "long unsigned int",
                            "unsigned int", "short unsigned int"})


def in_safe_order(torch, calls):
    """The calls as they come, except ``risky`` ones, which are held back until the list ends: a call that crashes
    the process then loses only the calls held back with it."""
    held = []
    for call in calls:
        if risky(torch, call):
            held.append(call)
            continue
        yield call
    yield from held
