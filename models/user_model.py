"""A user's own model, ``model = "package.module:factory"``: a function, called without arguments, returning an
``nn.Module`` whose forward takes a batch of images and returns the logits of a final ``nn.Linear`` (its classifier).

The module is wrapped as a ``SplitModel`` (``models/split_model.py``) so that every method runs on it: its forward is
traced with ``torch.fx`` and cut into stages, ``mid`` (φ: the input up to and including the module ``phi-end`` names,
its name in ``named_modules()``), ``upper`` (what lies between φ and the classifier) and ``head`` (the classifier).
The one split level, ``mid``, is where the FedFT family freezes by default, so FedFT's freezing, feature caching and
partial aggregation work unchanged; without ``phi-end`` the model has no split level (``freeze = "none"`` only), as
the methods that train the whole model need. A classifier of another number of classes than the data's is replaced
by a fresh ``nn.Linear`` of the data's (``new_head`` says so). The stages keep the module's own parameter names
below their prefix (``stages.mid.features.0.weight`` is the module's ``features.0.weight``; ``original_keys``), so
a state dict saved from the module itself loads into the wrapped one.

What cannot be wrapped is refused naming the setting (``UserModelError``): a factory that cannot be imported or
returns no ``nn.Module``, a ``phi-end`` that names no module, is not called as a whole or is called twice, a forward
that ``torch.fx`` cannot trace (one that branches on its input's values), returns no final ``nn.Linear``'s output,
or reads, after φ, values computed before φ's end (a skip connection across it) or a module of φ again.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from torch import fx, nn

from models.split_model import SplitModel

#: ``package.module:factory``.
USER_MODEL = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
USER_MODEL_HELP = "'package.module:factory' (your own: a function returning an nn.Module, importable by every node)"
#: The split level of a wrapped model: φ ends there.
USER_LEVEL = "mid"


class UserModelError(ValueError):
    """A user's model cannot be built or wrapped; the message names the setting."""


def is_user_model(name: str) -> bool:
    """Whether ``name`` names a user's factory rather than one of the app's models."""
    return USER_MODEL.match(name) is not None


def load_factory(spec: str) -> Callable[[], object]:
    """The factory ``spec`` names, imported; ``UserModelError`` naming ``model`` when it cannot be."""
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # the user's module may fail in any way while it is imported
        raise UserModelError(
            f"run config 'model' = {spec!r}: module {module_name!r} cannot be imported ({type(err).__name__}: {err}); "
            "it must be importable by the server and every client (in the project folder, or installed)"
        ) from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise UserModelError(f"run config 'model' = {spec!r}: module {module_name!r} has no function {attribute!r}")
    return factory


def source_digest(spec: str) -> str | None:
    """SHA-256 of the file defining the factory's module (what a cache of weights trained on it is keyed by; the
    modules it imports are not included), or None when it has no source file."""
    try:
        found = importlib.util.find_spec(spec.partition(":")[0])
    except (ImportError, ValueError):
        return None
    if found is None or not found.origin or not Path(found.origin).is_file():
        return None
    return hashlib.sha256(Path(found.origin).read_bytes()).hexdigest()


def build_user_model(spec: str, num_classes: int, phi_end: str = "") -> UserModel:
    """The module the factory ``spec`` returns, wrapped (with a new classifier when ``num_classes`` differs)."""
    factory = load_factory(spec)
    try:
        module = factory()
    except Exception as err:  # the user's code may fail in any way
        raise UserModelError(
            f"run config 'model' = {spec!r}: the factory failed ({type(err).__name__}: {err})"
        ) from None
    if not isinstance(module, nn.Module):
        raise UserModelError(
            f"run config 'model' = {spec!r}: the factory returned a {type(module).__name__}, not an nn.Module"
        )
    return UserModel(module, spec, num_classes, phi_end)


class _Tracer(fx.Tracer):
    """Traces into every module but torch's own layers and the module where φ ends."""

    def __init__(self, leaves: Iterable[str]) -> None:
        super().__init__()
        self.leaves = set(leaves)

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return module_qualified_name in self.leaves or super().is_leaf_module(m, module_qualified_name)


def _needed(output: fx.Node, inputs: set[fx.Node]) -> list[fx.Node]:
    """The nodes ``output`` is computed from, stopping at ``inputs`` (in no particular order)."""
    found: set[fx.Node] = set()
    todo = [output]
    while todo:
        node = todo.pop()
        if node in found or node in inputs:
            continue
        found.add(node)
        todo.extend(node.all_input_nodes)
    return list(found)


def _stage(root: nn.Module, graph: fx.Graph, order: dict[fx.Node, int], start: fx.Node, end: fx.Node) -> nn.Module:
    """A module computing ``end`` from ``start`` (the nodes between them copied, in the trace's order)."""
    if end is start:
        return nn.Identity()
    sub = fx.Graph()
    env = {start: sub.placeholder("x")}
    for node in sorted(_needed(end, {start}), key=order.__getitem__):
        env[node] = sub.node_copy(node, env.__getitem__)
    sub.output(env[end])
    return fx.GraphModule(root, sub)


class UserModel(SplitModel):
    """A user's ``nn.Module`` as a chain of stages ``mid`` (φ, when ``phi_end`` is given), ``upper`` and ``head``."""

    def __init__(self, module: nn.Module, spec: str, num_classes: int, phi_end: str = "") -> None:
        named = dict(module.named_modules())
        if phi_end and phi_end not in named:
            listed = ", ".join(name for name in named if name)
            raise UserModelError(
                f"run config 'phi-end' = {phi_end!r} names no module of model {spec!r} (its modules: {listed})"
            )
        try:
            graph = _Tracer([phi_end] if phi_end else []).trace(module)
        except Exception as err:  # torch.fx reports an untraceable forward with several exception types
            raise UserModelError(
                f"run config 'model' = {spec!r}: torch.fx cannot trace its forward ({type(err).__name__}: {err}); "
                "a forward that branches on its input's values cannot be split"
            ) from None
        order = {node: position for position, node in enumerate(graph.nodes)}
        inputs = [node for node in graph.nodes if node.op == "placeholder"]
        if len(inputs) != 1:
            raise UserModelError(f"run config 'model' = {spec!r}: its forward must take one input, not {len(inputs)}")
        output = next(node for node in graph.nodes if node.op == "output").args[0]
        head_name = output.target if isinstance(output, fx.Node) and output.op == "call_module" else None
        if not isinstance(head_name, str) or not isinstance(named.get(head_name), nn.Linear):
            raise UserModelError(
                f"run config 'model' = {spec!r}: its forward must return the output of a final nn.Linear (the "
                "classifier, whose input is the features the methods read)"
            )
        assert isinstance(output, fx.Node)
        head = named[head_name]
        assert isinstance(head, nn.Linear)
        features = output.args[0]
        if not isinstance(features, fx.Node) or len(output.all_input_nodes) != 1:
            raise UserModelError(f"run config 'model' = {spec!r}: its classifier {head_name!r} must take one input")
        start = inputs[0]
        stages: dict[str, nn.Module] = {}
        if phi_end:
            if phi_end == head_name:
                raise UserModelError(f"run config 'phi-end' = {phi_end!r} is the classifier: φ must end below it")
            calls = [node for node in graph.nodes if node.op == "call_module" and node.target == phi_end]
            if len(calls) != 1:
                raise UserModelError(
                    f"run config 'phi-end' = {phi_end!r}: model {spec!r} calls that module {len(calls)} times in its "
                    "forward; name a module it calls once, as a whole"
                )
            boundary = calls[0]
            if start in _needed(features, {boundary}):
                raise UserModelError(
                    f"run config 'phi-end' = {phi_end!r}: model {spec!r} reads, after that module, values computed "
                    "before its output (a skip connection across it); name a module whose output is all the rest reads"
                )
            stages[USER_LEVEL] = _stage(module, graph, order, start, boundary)
            start = boundary
        stages["upper"] = _stage(module, graph, order, start, features)
        self.new_head: tuple[str, int] | None = None
        if head.out_features != num_classes:
            self.new_head = (head_name, head.out_features)
            head = nn.Linear(head.in_features, num_classes, bias=head.bias is not None)
        stages["head"] = head
        lower = {id(t) for t in stages.get(USER_LEVEL, nn.Identity()).state_dict(keep_vars=True).values()}
        upper = {k: t for name in ("upper", "head") for k, t in stages[name].state_dict(keep_vars=True).items()}
        shared = [key for key, tensor in upper.items() if id(tensor) in lower]
        if shared:
            raise UserModelError(
                f"run config 'phi-end' = {phi_end!r}: model {spec!r} uses {shared[0]!r} both in φ and after it; "
                "name a module after which nothing of φ is used again"
            )
        super().__init__(stages, levels=(USER_LEVEL,) if phi_end else ())
        self.spec, self.phi_end = spec, phi_end
        #: Key of this model's state -> the key the module itself gives that entry.
        self.original_keys = {
            f"stages.{name}.{key}": f"{head_name}.{key}" if name == "head" else key
            for name, stage in self.stages.items()
            for key in stage.state_dict()
        }
        #: The module's own keys that no stage holds (modules its forward never calls).
        self.unused_keys = sorted(set(module.state_dict()) - set(self.original_keys.values()))
