"""ctypes binding over the public C API (deepslim.h): what a Python user gets is what a C user gets."""

from __future__ import annotations

import ctypes
import os
import sys
from importlib import metadata
from pathlib import Path

import numpy as np

from deepslim.runtime.errors import BY_STATUS, DsmRuntimeError, InvalidArgumentError

_LIB_NAME = "libdeepslim.so"
_lib: ctypes.CDLL | None = None

_i64_p = ctypes.POINTER(ctypes.c_int64)
_f32_p = ctypes.POINTER(ctypes.c_float)


def library_path() -> Path:
    """Where the native library is: $DEEPSLIM_LIBRARY, beside this module, or in the installed package."""
    candidates = []
    if os.environ.get("DEEPSLIM_LIBRARY"):
        candidates.append(Path(os.environ["DEEPSLIM_LIBRARY"]))
    candidates.append(Path(__file__).with_name(_LIB_NAME))
    try:  # an editable install keeps the built library in site-packages, apart from the sources
        for f in metadata.files("deepslim") or []:
            if f.name == _LIB_NAME:
                candidates.append(Path(f.locate()))
    except metadata.PackageNotFoundError:
        pass
    for path in candidates:
        if path.is_file():
            return path.resolve()
    raise ImportError(
        f"the deepslim native runtime ({_LIB_NAME}) was not found (looked in: "
        + ", ".join(str(p) for p in candidates)
        + "). Build it with `make build` (or `pip install .`), or set DEEPSLIM_LIBRARY to its path."
    )


def _load() -> ctypes.CDLL:
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(str(library_path()))
    st = ctypes.c_int
    vp = ctypes.c_void_p
    sig = {
        "ds_last_error": (ctypes.c_char_p, []),
        "ds_status_name": (ctypes.c_char_p, [st]),
        "ds_version": (ctypes.c_char_p, []),
        "ds_format_version": (ctypes.c_uint32, []),
        "ds_model_load_file": (st, [ctypes.c_char_p, ctypes.POINTER(vp)]),
        "ds_model_load_memory": (st, [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(vp)]),
        "ds_model_free": (None, [vp]),
        "ds_model_input_count": (st, [vp, ctypes.POINTER(ctypes.c_size_t)]),
        "ds_model_output_count": (st, [vp, ctypes.POINTER(ctypes.c_size_t)]),
        "ds_session_create": (st, [vp, vp, ctypes.POINTER(vp)]),
        "ds_session_free": (None, [vp]),
        "ds_session_set_input": (st, [vp, ctypes.c_size_t, _f32_p, _i64_p, ctypes.c_size_t]),
        "ds_session_run": (st, [vp]),
        "ds_session_output_shape": (
            st,
            [vp, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(_i64_p)],
        ),
        "ds_session_get_output": (st, [vp, ctypes.c_size_t, _f32_p, ctypes.c_size_t]),
        "ds_session_node_count": (st, [vp, ctypes.POINTER(ctypes.c_size_t)]),
        "ds_session_node_kernel": (
            st,
            [vp, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p)],
        ),
        "ds_isa": (ctypes.c_char_p, []),
        "ds_session_node_profile": (
            st,
            [
                vp,
                ctypes.c_size_t,
                ctypes.POINTER(ctypes.c_char_p),
                ctypes.POINTER(ctypes.c_char_p),
                ctypes.POINTER(ctypes.c_uint64),
                ctypes.POINTER(ctypes.c_uint64),
            ],
        ),
    }
    info_args = [
        vp,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(_i64_p),
    ]
    sig["ds_model_input_info"] = (st, info_args)
    sig["ds_model_output_info"] = (st, info_args)
    for name, (restype, argtypes) in sig.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    _lib = lib
    return lib


_fast: tuple | None = None


def _fast_calls(lib: ctypes.CDLL) -> tuple:
    """set_input, run and get_output taking buffer addresses as plain ints (no ctypes pointer
    objects per call)."""
    global _fast
    if _fast is None:
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        set_input = ctypes.CFUNCTYPE(ctypes.c_int, vp, sz, vp, vp, sz)(("ds_session_set_input", lib))
        run = ctypes.CFUNCTYPE(ctypes.c_int, vp)(("ds_session_run", lib))
        get_output = ctypes.CFUNCTYPE(ctypes.c_int, vp, sz, vp, sz)(("ds_session_get_output", lib))
        infer = ctypes.CFUNCTYPE(ctypes.c_int, vp, vp, vp, sz, vp, sz)(("ds_session_infer", lib))
        _fast = (set_input, run, get_output, infer)
    return _fast


_char_from_buffer = ctypes.c_char.from_buffer


def _address(a: np.ndarray) -> int:
    """The data address of a C-contiguous array; through the buffer protocol, which costs about a
    fifth of `a.ctypes.data`, for writable arrays."""
    if a.flags.writeable and a.size:
        return ctypes.addressof(_char_from_buffer(a))
    return a.ctypes.data


def _check(status: int, what: str) -> None:
    if status == 0:
        return
    lib = _load()
    message = (lib.ds_last_error() or b"").decode("utf-8", "replace")
    cls = BY_STATUS.get(status, DsmRuntimeError)
    name = (lib.ds_status_name(status) or b"?").decode()
    raise cls(f"{what}: {message} [{name}]")


class _SessionOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("threads", ctypes.c_int),
        ("profile", ctypes.c_int),
        ("kernels", ctypes.c_char_p),
    ]


def runtime_version() -> str:
    return _load().ds_version().decode()


def isa() -> str:
    """The SIMD level new sessions use ("scalar", "avx2", "avxvnni", "avx512", "avx512vnni"), after
    DS_FORCE_ISA."""
    level = _load().ds_isa()
    if level is None:
        raise InvalidArgumentError(f"DS_FORCE_ISA={os.environ.get('DS_FORCE_ISA')!r} is unknown or unavailable here")
    return level.decode()


class Session:
    """A loaded .dsm model, ready to run.

    `run(x)` takes a float32 array (NCHW for images) per graph input, checks its shape against the
    model, and returns the output array (or a dict name -> array when the model has several outputs).
    """

    def __init__(self, model: str | os.PathLike | bytes, threads: int = 1, profile: bool = False,
                 kernels: dict[str, str] | None = None):
        """`model` is a .dsm file's path, or its bytes. With `profile`, every run times each node
        (see `node_profile`).

        `kernels` maps node names to the kernel their op should use (see `node_kernels` for the
        choices). None (the default): the choices `deepslim tune` measured for this model, CPU,
        SIMD level and thread count when its cache file is beside the model
        (MODEL.dsm.tune.json), else each op's own rule; {}: each op's own rule."""
        lib = _load()
        self._lib = lib
        self._model = ctypes.c_void_p()
        self._session = ctypes.c_void_p()
        if not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a whole number >= 1, got {threads!r}")
        if isinstance(model, (bytes, bytearray, memoryview)):
            self.path = Path("<memory>")
            data = bytes(model)
            _check(lib.ds_model_load_memory(data, len(data), ctypes.byref(self._model)), "loading a .dsm from memory")
        else:
            self.path = Path(model)
            if not self.path.is_file():
                raise FileNotFoundError(f"model file {str(self.path)!r} does not exist")
            _check(
                lib.ds_model_load_file(os.fsencode(self.path), ctypes.byref(self._model)),
                f"loading {self.path}",
            )
        self.input_names, self.input_shapes = self._io_info(lib.ds_model_input_count, lib.ds_model_input_info)
        self.output_names, self.output_shapes = self._io_info(
            lib.ds_model_output_count, lib.ds_model_output_info
        )
        from_cache = kernels is None
        if from_cache:
            from deepslim.runtime.tune import cached_kernels

            kernels = {} if self.path.name == "<memory>" else cached_kernels(self.path, threads)
        self.kernels = dict(kernels)
        status = self._create(threads, profile)
        if status and from_cache and self.kernels:
            # A cache this runtime cannot take (written by another version): the ops' own rules.
            message = (lib.ds_last_error() or b"").decode("utf-8", "replace")
            print(f"deepslim: ignoring the tuning cache of {self.path.name}: {message}", file=sys.stderr)
            self.kernels = {}
            status = self._create(threads, profile)
        _check(status, f"creating a session for {self.path}")
        self.threads = threads
        self._calls = _fast_calls(lib)
        self._dims: dict[tuple[int, ...], ctypes.Array] = {}
        self._output_shapes: dict[tuple, list[tuple[int, ...]]] = {}
        self._single: dict[tuple[int, ...], tuple] = {}  # one-input/one-output models: shape -> (dims, out shape)

    def _create(self, threads: int, profile: bool) -> int:
        text = "\n".join(f"{node}={kernel}" for node, kernel in self.kernels.items())
        options = _SessionOptions(ctypes.sizeof(_SessionOptions), threads, int(bool(profile)),
                                  text.encode() if text else None)
        return self._lib.ds_session_create(self._model, ctypes.byref(options), ctypes.byref(self._session))

    def _io_info(self, count_fn, info_fn) -> tuple[list[str], list[tuple[int, ...]]]:
        n = ctypes.c_size_t()
        _check(count_fn(self._model, ctypes.byref(n)), "reading the model's inputs/outputs")
        names, shapes = [], []
        for i in range(n.value):
            name = ctypes.c_char_p()
            rank = ctypes.c_size_t()
            dims = _i64_p()
            _check(
                info_fn(self._model, i, ctypes.byref(name), ctypes.byref(rank), ctypes.byref(dims)),
                "reading the model's inputs/outputs",
            )
            names.append(name.value.decode())
            shapes.append(tuple(int(dims[k]) for k in range(rank.value)))
        return names, shapes

    def run(self, *inputs: np.ndarray, **named: np.ndarray):
        if len(inputs) == 1 and not named:
            # One array for a one-input, one-output model, a shape run before: one C call.
            x = inputs[0]
            seen = self._single.get(x.shape) if type(x) is np.ndarray else None
            if seen is not None and x.dtype == np.float32 and x.flags.c_contiguous:
                dims, out_shape = seen
                out = np.empty(out_shape, dtype=np.float32)
                status = self._calls[3](self._session, _address(x), dims, x.ndim, _address(out), out.size)
                if status:
                    _check(status, f"running {self.path.name}")
                return out
        arrays = self._gather_inputs(inputs, named)
        set_input, run, get_output, _ = self._calls
        session = self._session
        keep = []  # the runtime reads the input buffers during run: keep them alive until then
        for i, x in enumerate(arrays):
            if not (type(x) is np.ndarray and x.dtype == np.float32 and x.flags.c_contiguous):
                x = np.asarray(x, dtype=np.float32, order="C")  # keeps 0-d arrays 0-d
            dims = self._dims.get(x.shape)  # ctypes arrays of the shapes seen, made once each
            if dims is None:
                dims = self._dims[x.shape] = (ctypes.c_int64 * x.ndim)(*x.shape)
            keep.append(x)
            # Messages are built only on an error: this is the per-call path.
            status = set_input(session, i, _address(x), dims, x.ndim)
            if status:
                _check(status, f"input {self.input_names[i]!r}")
        status = run(session)
        if status:
            _check(status, f"running {self.path.name}")
        # Output shapes follow from the input shapes alone: ask the runtime once per input shapes.
        key = keep[0].shape if len(keep) == 1 else tuple(x.shape for x in keep)
        shapes = self._output_shapes.get(key)
        if shapes is None:
            shapes = self._output_shapes[key] = [self._output_shape(i) for i in range(len(self.output_names))]
        outputs = []
        for i, shape in enumerate(shapes):
            out = np.empty(shape, dtype=np.float32)
            status = get_output(session, i, _address(out), out.size)
            if status:
                _check(status, f"output {self.output_names[i]!r}")
            outputs.append(out)
        if len(keep) == 1 and len(outputs) == 1:
            self._single[keep[0].shape] = (self._dims[keep[0].shape], shapes[0])
        del keep
        if len(outputs) == 1:
            return outputs[0]
        return dict(zip(self.output_names, outputs))

    def node_profile(self) -> list[dict]:
        """Per node, in run order: name, op, runs timed and mean milliseconds per run (profile=True)."""
        lib = self._lib
        n = ctypes.c_size_t()
        _check(lib.ds_session_node_count(self._session, ctypes.byref(n)), "reading the node count")
        rows = []
        for i in range(n.value):
            name, op = ctypes.c_char_p(), ctypes.c_char_p()
            runs, total = ctypes.c_uint64(), ctypes.c_uint64()
            _check(
                lib.ds_session_node_profile(
                    self._session, i, ctypes.byref(name), ctypes.byref(op), ctypes.byref(runs), ctypes.byref(total)
                ),
                f"reading node {i}'s profile",
            )
            ms = total.value / 1e6 / runs.value if runs.value else 0.0
            rows.append({"name": name.value.decode(), "op": op.value.decode(), "runs": runs.value, "ms": ms})
        return rows

    def node_kernels(self) -> list[dict]:
        """Per node, in run order: name, op, the kernel it runs ("" when its op has no choice) and
        the kernels its op can be asked for (`kernels=`)."""
        lib = self._lib
        n = ctypes.c_size_t()
        _check(lib.ds_session_node_count(self._session, ctypes.byref(n)), "reading the node count")
        profile = self.node_profile()
        rows = []
        for i in range(n.value):
            kernel, choices = ctypes.c_char_p(), ctypes.c_char_p()
            _check(
                lib.ds_session_node_kernel(self._session, i, ctypes.byref(kernel), ctypes.byref(choices)),
                f"reading node {i}'s kernel",
            )
            listed = choices.value.decode()
            rows.append({"name": profile[i]["name"], "op": profile[i]["op"], "kernel": kernel.value.decode(),
                         "choices": listed.split(",") if listed else []})
        return rows

    def time_nodes(self, *inputs: np.ndarray, runs: int = 20, warmup: int = 3) -> list[dict]:
        """`node_profile` rows whose "ms" is the mean over `runs` runs on `inputs`, after `warmup`
        untimed runs (a session made with profile=True)."""
        for _ in range(warmup):
            self.run(*inputs)
        before = self.node_profile()
        for _ in range(runs):
            self.run(*inputs)
        rows = self.node_profile()
        for r, b in zip(rows, before):
            timed = r["runs"] - b["runs"]
            r["ms"] = (r["ms"] * r["runs"] - b["ms"] * b["runs"]) / timed if timed else 0.0
            r["runs"] = timed
        return rows

    def _output_shape(self, i: int) -> tuple[int, ...]:
        rank = ctypes.c_size_t()
        dims = _i64_p()
        _check(
            self._lib.ds_session_output_shape(self._session, i, ctypes.byref(rank), ctypes.byref(dims)),
            f"output {self.output_names[i]!r}",
        )
        return tuple(int(dims[k]) for k in range(rank.value))

    def _gather_inputs(self, inputs, named) -> list[np.ndarray]:
        if inputs and named:
            raise TypeError("pass inputs either by position or by name, not both")
        if named:
            unknown = set(named) - set(self.input_names)
            if unknown:
                raise KeyError(f"unknown input(s) {sorted(unknown)}; the model's inputs are {self.input_names}")
            missing = [n for n in self.input_names if n not in named]
            if missing:
                raise KeyError(f"missing input(s) {missing}")
            return [named[n] for n in self.input_names]
        if len(inputs) != len(self.input_names):
            raise TypeError(
                f"the model takes {len(self.input_names)} input(s) {self.input_names}, got {len(inputs)}"
            )
        return list(inputs)

    def close(self) -> None:
        if getattr(self, "_session", None):
            self._lib.ds_session_free(self._session)
            self._session = ctypes.c_void_p()
        if getattr(self, "_model", None):
            self._lib.ds_model_free(self._model)
            self._model = ctypes.c_void_p()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        ins = ", ".join(f"{n}{list(s)}" for n, s in zip(self.input_names, self.input_shapes))
        outs = ", ".join(f"{n}{list(s)}" for n, s in zip(self.output_names, self.output_shapes))
        return f"Session({str(self.path)!r}, threads={self.threads}, inputs: {ins}; outputs: {outs})"
