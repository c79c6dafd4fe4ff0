"""prof._torch: zones for a PyTorch training loop, with no code change.

Installed by ``python -m prof script.py`` or by ``import prof`` with
``PROF_TORCH=1`` in the environment (docs/TORCH.md). It never imports torch
itself: if torch is not loaded yet, a finder on ``sys.meta_path`` waits for
the script's ``import torch`` and instruments torch right after its module
has run. Then:

  data        ``_BaseDataLoaderIter.__next__``: what the loop waits for a
              batch in this process (a worker's own zones stay its own);
  model       ``nn.Module.__call__``, patched: each module the script calls
              itself (a root: ``model``, ``netG``, ``loss_fn``), named as
              the script names it, and its modules down to
              ``PROF_TORCH_DEPTH`` levels (default 2: the model and its
              direct children), each named by its attribute path
              (``model.transformer.h``; the blocks of a ModuleList of one
              class are one stage); a root called in evaluation (grad
              disabled, or the module in eval mode) is ``model (eval)``;
  backward    ``torch.autograd.backward`` (``Tensor.backward`` calls it);
  optimizer   each ``Optimizer`` subclass's ``step`` (and ``GradScaler.step``),
              ``zero_grad`` as ``optimizer.zero_grad``.

The first optimizer's ``step()`` is the iteration boundary (in a script
that makes no optimizer, each ``backward``): ``prof.step()``
is called at the next boundary check (the next batch, zero_grad, root
module call or optimizer step, or the end of the run) unless the step
count moved in between, which means the script steps by itself; from then
on the script's own ``prof.step()`` calls are the only ones.

Why a patched ``Module.__call__`` and not torch's global module hooks
(``register_module_forward_pre_hook``): any global hook sends every module
call through ``_call_impl``'s slow path; a Python ``__call__`` that looks
the module up in a dict and calls the original costs less per module call
(bench/torch_step.py, docs/BENCHMARKS.md), and only the few named modules
pay for a zone. On CUDA (``torch.cuda.is_initialized()``: this code never
initializes CUDA) each zone is a ``prof.cuda_zone`` on the current stream.
"""

import os
import sys
import threading
import weakref

from . import _prof

_zone = _prof.zone
_cuda_zone = _prof.cuda_zone
_step_count = _prof.step_count
_pkg = sys.modules[__package__]


def _step():
    # The package's step, looked up at each call: prof.distributed puts its
    # own there (PROF_RANKS=1, enable()), which adds the cross-rank
    # reduction to the step.
    return _pkg.step()


_DEFAULT_DEPTH = 2


def _read_depth():
    v = os.environ.get("PROF_TORCH_DEPTH", "").strip()
    if not v:
        return _DEFAULT_DEPTH
    try:
        d = int(v)
        if d < 0:
            raise ValueError
        return d
    except ValueError:
        sys.stderr.write(f"prof: PROF_TORCH_DEPTH=\"{v[:40]}\" is not a depth (0, 1, 2, ...); "
                         f"using {_DEFAULT_DEPTH}\n")
        return _DEFAULT_DEPTH


class _Local(threading.local):
    # open: how many of our zones this thread has open. A module called
    # with none open is an outermost (root) call, the place for a boundary
    # check and for naming a new root; inside backward, a batch or an
    # optimizer step no module becomes a root (activation checkpointing
    # reruns forwards inside backward; DataLoader transforms may be modules).
    open = 0
    cuda = None         # the open CUDA zones of this thread, innermost last


_tls = _Local()

# Module identity -> its Zone, or False for a module that is known and not
# timed (the model inside a DDP wrapper). Keyed by id(): a module carries
# nothing of ours (torch.save and deepcopy see the module as it was); a
# weak reference's callback removes the entry before the id can be reused.
_names = {}
_refs = {}
_names_get = _names.get
# Roots only: module identity -> the Zone of its calls in evaluation.
_eval = {}
_eval_get = _eval.get

_state = {
    "installed": False,
    "done": False,          # torch instrumented
    "depth": _DEFAULT_DEPTH,
    "opt_made": False,      # an optimizer was made or stepped: its steps are the steps
    "auto": True,           # the first optimizer's step() is prof.step()
    "expected": 0,          # the step count after our own last prof.step()
    "pending": False,       # a first-optimizer step() not yet turned into one
    "first_opt": None,      # weak reference to that optimizer
    "opt_open": 0,          # optimizer steps open (nested ones are not zoned)
    "bwd_open": 0,
    "cuda": False,          # torch.cuda.is_initialized() was seen True
}


def _no_cuda():
    return False


_cuda_is_initialized = _no_cuda     # torch.cuda.is_initialized once torch is here


def _grad_enabled():
    return True




def _cuda_ready():
    if _state["cuda"]:
        return True
    try:
        if _cuda_is_initialized():
            _state["cuda"] = True
            return True
    except Exception:
        pass
    return False


def _cuda_enter(name):
    import torch

    z = _cuda_zone(name, torch.cuda.current_stream())
    z.__enter__()
    stack = _tls.cuda
    if stack is None:
        stack = _tls.cuda = []
    stack.append(z)


def _cuda_exit():
    _tls.cuda.pop().__exit__(None, None, None)


# ---------------------------------------------------------------------------
# GPU memory of a root module's stage, from PyTorch's caching allocator

_counter = _prof.counter
_mem_names = {}     # stage name -> its counter's name ("gpu mem+ model")


def _gpu_mem_now():
    """(memory_allocated, max_memory_allocated) of the current device, or
    None. Reads only: the peak is never reset, so a script that reads or
    resets it itself sees its own figures."""
    try:
        cuda = sys.modules["torch"].cuda
        return cuda.memory_allocated(), cuda.max_memory_allocated()
    except Exception:
        return None


def _gpu_mem_end(name, start):
    """A root stage ended: how far it raised the allocator's peak (a counter
    "gpu mem+ NAME" of bytes, recorded when it rose), and the allocator's
    bytes allocated and peak now (counters "gpu mem allocated" and
    "gpu mem peak")."""
    end = _gpu_mem_now()
    if start is None or end is None:
        return
    rise = end[1] - max(start[0], start[1])
    if rise > 0:
        c = _mem_names.get(name)
        if c is None:
            c = _mem_names[name] = "gpu mem+ " + name
        _counter(c, float(rise))
    _counter("gpu mem allocated", float(end[0]))
    _counter("gpu mem peak", float(end[1]))


# ---------------------------------------------------------------------------
# The iteration boundary

def _boundary():
    """At the top of an iteration (nothing of ours open): turn the first
    optimizer's last step() into prof.step(), unless someone else stepped
    since, in which case the script steps by itself and we stop."""
    st = _state
    if not st["auto"]:
        return
    n = _step_count()
    if n != st["expected"]:
        st["auto"] = False
        st["pending"] = False
        return
    if st["pending"]:
        st["pending"] = False
        st["expected"] = _step()


def _at_exit():
    # The last iteration's step, before the final summary: run by
    # threading's exit hooks, which come before every atexit handler (prof's
    # own moves to the end of that list when log_to_logging() is called);
    # through atexit, after prof's registration, where those are missing.
    _boundary()


# ---------------------------------------------------------------------------
# forward: Module.__call__

_loop_cache = {}


def _loop_names(code):
    """The variables a ``for`` loop of code binds (``for t in
    self.transforms: img = t(img)``): each turn binds another module to
    the name, so it names none of them (their class does)."""
    names = _loop_cache.get(code)
    if names is None:
        import dis

        names = set()
        target = False      # in a loop's target (``for i, t in ...`` unpacks)
        try:
            for ins in dis.get_instructions(code):
                if ins.opname == "FOR_ITER":
                    target = True
                elif target and ins.opname.startswith("STORE_"):
                    names.add(ins.argval)
                elif not (target and ins.opname.startswith("UNPACK_")):
                    target = False
        except Exception:
            pass
        _loop_cache[code] = names
    return names


def _binding_name(mod, frame):
    """The name the calling code knows the module by: a local or global
    variable bound to it, or an attribute of a local (``self.model``)."""
    f = frame
    while f is not None and f.f_code.co_filename == __file__:
        f = f.f_back
    if f is None:
        return None
    loop = _loop_names(f.f_code)
    for scope in (f.f_locals, f.f_globals):
        for k, v in list(scope.items()):
            if v is mod and k != "self" and not k.startswith("_") and k not in loop:
                return k
    for v in list(f.f_locals.values()):
        try:
            d = object.__getattribute__(v, "__dict__")
        except Exception:
            continue
        if isinstance(d, dict):
            for k, vv in list(d.items()):
                if vv is mod:
                    return k.lstrip("_") or k
    return None


def _forget(key):
    _names.pop(key, None)
    _eval.pop(key, None)
    _refs.pop(key, None)


def _remember(mod, value):
    key = id(mod)
    try:
        _refs[key] = weakref.ref(mod, lambda _r, key=key: _forget(key))
    except TypeError:
        return
    _names[key] = value


def _inner(mod):
    """The module a wrapper runs (DDP, DataParallel), or None."""
    if type(mod).__name__ in ("DistributedDataParallel", "DataParallel"):
        inner = getattr(mod, "module", None)
        if inner is not None and inner is not mod:
            return inner
    return None


def _is_compiled(mod):
    return type(mod).__name__ == "OptimizedModule" and hasattr(mod, "_orig_mod")


def _name_module(mod, path, level):
    if level > _state["depth"] or id(mod) in _names:
        return
    _remember(mod, _zone(path))
    _name_below(mod, path, level)


def _name_below(mod, path, level):
    inner = _inner(mod)
    while inner is not None:
        # The wrapper's forward is the model's: one stage, and the model's
        # modules are named as if the wrapper were not there.
        if id(inner) not in _names:
            _remember(inner, False)
        mod = inner
        inner = _inner(mod)
    if _is_compiled(mod):
        # The compiled call is one zone: its modules run inside the graph.
        if id(mod._orig_mod) not in _names:
            _remember(mod._orig_mod, False)
        return
    _name_children(mod._modules, path, level + 1)


def _name_children(children, path, level):
    import torch.nn as nn

    for cname, child in children.items():
        if child is None:
            continue
        cpath = f"{path}.{cname}"
        if isinstance(child, (nn.ModuleList, nn.ModuleDict)):
            # Containers are never called: their members sit at their level.
            kids = {k: c for k, c in child._modules.items() if c is not None}
            if (isinstance(child, nn.ModuleList) and len(kids) > 1
                    and len({type(c) for c in kids.values()}) == 1
                    and not any(isinstance(c, (nn.ModuleList, nn.ModuleDict))
                                for c in kids.values())):
                # Repeated blocks: one stage, counted once per block.
                for c in kids.values():
                    _name_module(c, cpath, level)
            else:
                _name_children(kids, cpath, level)
        else:
            _name_module(child, cpath, level)


def _name_root(mod, frame):
    """Name a module called with none of our zones open (a root), and the
    modules below it to the depth. Every root is a stage of the name the
    script calls it by (``model``, ``netG``, ``loss_fn``; its class name
    when prof finds none), and its modules are named from there
    (``model.encoder``): two models (a GAN's generator and discriminator)
    are two stages, neither of them called ``forward``. Its calls in
    evaluation are a stage apart, ``model (eval)``, with the same modules
    below."""
    if _state["depth"] < 1:
        _remember(mod, False)
        return False
    name = _binding_name(mod, frame) or type(mod).__name__
    z = _zone(name)
    _remember(mod, z)
    _eval[id(mod)] = _zone(name + " (eval)")
    _name_below(mod, name, 1)
    return z


def _new_root(mod, frame):
    # Naming must never break the script's forward: a module it cannot name
    # is left untimed, said once.
    try:
        if mod.__dict__.get("_is_replica"):
            # DataParallel's per-forward copies, called on its threads: the
            # wrapper's zone holds them.
            _remember(mod, False)
            return False
        return _name_root(mod, frame)
    except Exception as e:
        _remember(mod, False)
        if not _state.get("name_failed"):
            _state["name_failed"] = True
            sys.stderr.write(f"prof: could not name {type(mod).__name__} for its zones "
                             f"({type(e).__name__}: {e}); it is not timed\n")
        return False


def _make_call(orig_call, compiling):
    tls = _tls
    get = _names_get

    def __call__(self, *args, **kwargs):
        if compiling is not None and compiling():
            # Inside torch.compile's tracing: nothing of ours in the graph.
            return orig_call(self, *args, **kwargs)
        z = get(id(self))
        if z is None:
            if tls.open:
                return orig_call(self, *args, **kwargs)
            z = _new_root(self, sys._getframe(1))
        if z is False:
            return orig_call(self, *args, **kwargs)
        root = not tls.open
        if root:
            _boundary()
            if not self.training or not _grad_enabled():
                z = _eval_get(id(self), z)
        tls.open += 1
        try:
            if _state["cuda"] or _cuda_ready():
                mem = _gpu_mem_now() if root else None
                _cuda_enter(z.name)
                try:
                    return orig_call(self, *args, **kwargs)
                finally:
                    _cuda_exit()
                    if root:
                        _gpu_mem_end(z.name, mem)
            with z:
                return orig_call(self, *args, **kwargs)
        finally:
            tls.open -= 1

    __call__._prof_orig = orig_call
    return __call__


# ---------------------------------------------------------------------------
# data, backward, optimizer: wrapped functions

def _timed(name, fn, *args, **kwargs):
    """fn(*args, **kwargs) in the zone name (a CUDA zone on CUDA), as one of
    our zones (no module inside becomes a root)."""
    tls = _tls
    tls.open += 1
    try:
        if _state["cuda"] or _cuda_ready():
            _cuda_enter(name)
            try:
                return fn(*args, **kwargs)
            finally:
                _cuda_exit()
        with _zone(name):
            return fn(*args, **kwargs)
    finally:
        tls.open -= 1


def _wrap_next(orig):
    map_kind = None
    try:
        from torch.utils.data.dataloader import _DatasetKind
        map_kind = _DatasetKind.Map
    except Exception:
        pass
    tls = _tls
    st = _state
    # What runs before the zone opens is outside the stage and runs cold
    # after the step's compute (30-40 us a call with a len() of the sampler
    # and _timed's frame, 18-25 us now: bench/torch_data_gap.py), so the
    # checks are dict reads and the zone opens in C at the call.
    timed = _zone("data")(orig)

    def batches(self, si):
        # len() of the sampler runs the dataset's __len__: once per epoch
        # (torch makes a _sampler_iter per epoch, and the standard samplers
        # fix their length when it starts), not once per batch.
        try:
            n = len(self._index_sampler)
        except Exception:
            n = None
        self.__dict__["_prof_epoch"] = (si, n)
        return n

    def __next__(self):
        if map_kind is not None:
            d = self.__dict__
            si = d.get("_sampler_iter")
            if si is not None and d.get("_dataset_kind") == map_kind:
                ep = d.get("_prof_epoch")
                n = ep[1] if ep is not None and ep[0] is si else batches(self, si)
                if n is not None and d.get("_num_yielded", 0) >= n:
                    # The call that ends the epoch (StopIteration): not a
                    # batch, so not a data wait of a step. Outside any
                    # try: its StopIteration is the loop's.
                    return orig(self)
        if not tls.open:
            _boundary()
        if st["cuda"] or _cuda_ready():
            return _timed("data", orig, self)
        tls.open += 1
        try:
            return timed(self)
        finally:
            tls.open -= 1

    __next__._prof_orig = orig
    return __next__


def _wrap_backward(orig):
    def backward(*args, **kwargs):
        st = _state
        if st["bwd_open"]:
            return orig(*args, **kwargs)
        st["bwd_open"] += 1
        try:
            return _timed("backward", orig, *args, **kwargs)
        finally:
            st["bwd_open"] -= 1
            if not st["opt_made"] and st["auto"] and not _tls.open:
                # No optimizer in this script (it updates its parameters
                # itself): each backward ends an iteration.
                st["pending"] = True

    backward.__wrapped__ = orig
    backward.__doc__ = orig.__doc__
    backward.__name__ = orig.__name__
    backward._prof_orig = orig
    return backward


def _optimizer_step(opt, orig, args, kwargs):
    st = _state
    if not st["opt_made"]:
        # An optimizer made before prof was imported (PROF_TORCH=1 and a
        # late `import prof`): its steps are the steps from now on, not
        # the backward before it.
        st["opt_made"] = True
        st["pending"] = False
    if st["opt_open"]:
        return orig(*args, **kwargs)        # inside another one's step
    first = st["first_opt"]
    if first is None:
        try:
            st["first_opt"] = first = weakref.ref(opt)
        except TypeError:
            pass
    is_first = first is not None and first() is opt
    if is_first and not _tls.open:
        _boundary()
    st["opt_open"] += 1
    try:
        return _timed("optimizer", orig, *args, **kwargs)
    finally:
        st["opt_open"] -= 1
        if is_first and st["auto"]:
            st["pending"] = True


_wrappers = set()      # our wrappers of optimizer methods


def _wrap_method(cls, attr, make):
    """Wrap cls.attr unless its outermost layer is ours already. torch
    (1.13 and 2.x) wraps a subclass's step() for its profiler when the first
    instance is made, around what it finds; we wrap again after that so the
    zone holds what the script's call costs. A layer of ours inside another
    finds an optimizer step open and only calls through."""
    fn = cls.__dict__.get(attr)
    if fn is None or fn in _wrappers:
        return
    import functools

    w = functools.wraps(fn)(make(fn))
    _wrappers.add(w)
    setattr(cls, attr, w)


def _make_opt_step(orig):
    def step(self, *args, **kwargs):
        return _optimizer_step(self, orig, (self, *args), kwargs)
    return step


def _make_scaler_step(orig):
    def step(self, optimizer, *args, **kwargs):
        return _optimizer_step(optimizer, orig, (self, optimizer, *args), kwargs)
    return step


def _make_zero_grad(orig):
    def zero_grad(self, *args, **kwargs):
        if _state["opt_open"]:
            return orig(self, *args, **kwargs)
        if not _tls.open:
            _boundary()     # often the first call of an iteration
        return _timed("optimizer.zero_grad", orig, self, *args, **kwargs)
    return zero_grad


def _wrap_optimizer_class(cls):
    for c in cls.__mro__:
        if c is object:
            break
        _wrap_method(c, "step", _make_opt_step)
        _wrap_method(c, "zero_grad", _make_zero_grad)


def _all_subclasses(cls):
    out, todo = [], [cls]
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(c.__subclasses__())
    return out


# ---------------------------------------------------------------------------
# Installing

def _instrument(torch):
    if _state["done"]:
        return
    _state["done"] = True
    import torch.nn
    import torch.optim
    import torch.autograd
    import torch.utils.data.dataloader as dl

    _state["depth"] = _read_depth()
    global _cuda_is_initialized, _grad_enabled
    _cuda_is_initialized = getattr(getattr(torch, "cuda", None), "is_initialized", _no_cuda)
    _grad_enabled = getattr(torch, "is_grad_enabled", _grad_enabled)

    # torch 2.x: a module called while torch.compile traces must not run
    # our code (dynamo would trace it into the graph or break the graph).
    # Dynamo reads is_compiling() as a constant; eager code pays one call.
    compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if compiling is None and hasattr(torch, "compile"):
        try:
            import torch._dynamo
            compiling = torch._dynamo.is_compiling
        except Exception:
            compiling = None

    Module = torch.nn.Module
    if getattr(Module.__call__, "_prof_orig", None) is None:
        Module.__call__ = _make_call(Module.__call__, compiling)

    it = dl._BaseDataLoaderIter
    if getattr(it.__next__, "_prof_orig", None) is None:
        it.__next__ = _wrap_next(it.__next__)

    if getattr(torch.autograd.backward, "_prof_orig", None) is None:
        torch.autograd.backward = _wrap_backward(torch.autograd.backward)

    Optimizer = torch.optim.Optimizer
    for cls in _all_subclasses(Optimizer):
        _wrap_optimizer_class(cls)
    # Subclasses defined later (the script's own): wrapped when their first
    # instance is made.
    init = Optimizer.__init__
    if getattr(init, "_prof_orig", None) is None:
        import functools

        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            init(self, *args, **kwargs)
            _state["opt_made"] = True
            _wrap_optimizer_class(type(self))
        __init__._prof_orig = init
        Optimizer.__init__ = __init__

    for modname in ("torch.cuda.amp.grad_scaler", "torch.amp.grad_scaler"):
        try:
            __import__(modname)
            scaler = sys.modules[modname].GradScaler
        except Exception:
            continue
        _wrap_method(scaler, "step", _make_scaler_step)

    # PROF_RANKS=1: prof's group is made as init_process_group returns,
    # as when torch.distributed was imported before prof.
    from . import distributed
    distributed._torch_loaded()

    # The script's prof.step() calls, if any, are counted from here.
    _state["expected"] = _step_count()


class _TorchFinder:
    """Waits for ``import torch``: finds torch's spec with the other
    finders and has its loader call ``_instrument`` once the module ran."""

    def __init__(self):
        self.busy = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" or self.busy:
            return None
        self.busy = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self:
                    continue
                find = getattr(finder, "find_spec", None)
                if find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self.busy = False
        loader = getattr(spec, "loader", None) if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        finder = self
        orig_exec = loader.exec_module

        def exec_module(module):
            try:
                del loader.exec_module
            except AttributeError:
                pass
            try:
                sys.meta_path.remove(finder)
            except ValueError:
                pass
            orig_exec(module)
            _instrument(module)

        try:
            loader.exec_module = exec_module
        except AttributeError:
            return spec
        return spec


def install():
    """Instrument torch now if it is loaded, else when it is imported.
    Idempotent."""
    if _state["installed"]:
        return
    _state["installed"] = True
    try:
        threading._register_atexit(_at_exit)
    except Exception:
        import atexit

        atexit.register(_at_exit)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "nn"):
        _instrument(torch)
    else:
        sys.meta_path.insert(0, _TorchFinder())


def enabled_by_env():
    v = os.environ.get("PROF_TORCH", "").strip().lower()
    return v not in ("", "0", "off", "false", "no")
