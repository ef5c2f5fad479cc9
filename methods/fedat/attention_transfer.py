"""FedAT: attention transfer + metadata training with custom-size client models (thesis §5.2–5.3, Alg. 3).

Attention map of a feature map F ∈ R^{C×H×W}: A = Σ_c |f_c|^p (eq. 5.5, p = 2), vectorised Q = vec(A).
AT loss between a student and a teacher over a set I of levels (eq. 5.6 / 5.14), with Q̂ = Q / ‖Q‖₂:

- ``form="reference"`` (default): β/2 · Σ_{l∈I} mean_{i,j}(Q̂_s − Q̂_t)², the original AT code's scale, for which
  β = 1,000 was chosen (Zagoruyko & Komodakis); the thesis takes β = 1,000 from there, so this scale is the
  default although the thesis text writes the next form.
- ``form="thesis"``: β · Σ_{l∈I} mean_i ‖Q̂_s − Q̂_t‖₂ (eq. 5.14's non-squared L2 norm; its sum over samples
  becomes the batch mean, as the CE beside it does in mini-batch SGD).

Server steps on a fresh copy of the global model w_g^t for each client k, split at the metadata level l:
1. all of w_g trains on D_g: CE + β·AT against the client model w_{k,E} at every level of I;
2. only θ (stages above l) trains, on the client's metadata D_k,meta fed in at level l: CE;
3. only φ (stages up to l) trains on D_g: CE + β·AT at I_sub = levels of I inside φ; θ's weights are frozen
   bitwise (no gradient, not given to the optimiser). θ's BatchNorm (``fedat.step3-theta-batchnorm``): ``train``
   (default) normalises with batch statistics during the step, as a network does in training, and ends with its running
   statistics re-estimated on φ_{g,s3}'s maps of D_g, the maps θ reads in the finished model; ``frozen`` keeps θ in
   eval mode with the statistics of step 2's metadata.
Then w_g^{t+1} = Σ_k p_k w_{g,s3}^(k) with p_k = |D_k|/Σ_j|D_j| (eq. 5.18), and each client model is refined on
the server like step 1 with the roles swapped (eq. 5.19: student w_{k,E}, teacher w_g^{t+1}).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from methods.common.state_averaging import average_states
from models.batchnorm import settle_batchnorm
from models.outputs import eval_mode, feature_map_shapes, forward_with_maps
from models.split_model import SplitModel

ATForm = Literal["reference", "thesis"]
Step = Literal[1, 2, 3]
ThetaBatchNorm = Literal["train", "frozen"]

LEVEL_KEY = "common.metadata-level"
AT_LEVELS_KEY = "fedat.at-levels"
BETA_KEY = "fedat.at-beta"
FORM_KEY = "fedat.at-form"
AT_FORMS: tuple[str, ...] = ("reference", "thesis")
THETA_BATCHNORM_KEY = "fedat.step3-theta-batchnorm"
THETA_BATCHNORM: tuple[str, ...] = ("train", "frozen")

#: β of the thesis (borrowed from the AT paper).
DEFAULT_BETA = 1000.0
#: The three paired levels of our WRNs (I in eqs. 5.14 and 5.20).
AT_LEVELS: tuple[str, ...] = ("low", "mid", "up")


def check_fedat_settings(metadata_level: str, beta: float, form: str, at_levels: Sequence[str] = AT_LEVELS) -> None:
    """Refuse an unknown ``common.metadata-level`` or ``fedat.at-levels`` entry, ``fedat.at-beta`` < 0 and an unknown
    ``fedat.at-form``."""
    if metadata_level not in AT_LEVELS:
        raise ValueError(f"{LEVEL_KEY} must be one of {', '.join(AT_LEVELS)}, got {metadata_level!r}")
    unknown = [level for level in at_levels if level not in AT_LEVELS]
    if unknown or not at_levels:
        raise ValueError(f"{AT_LEVELS_KEY} must be a non-empty subset of {', '.join(AT_LEVELS)}, got {list(at_levels)}")
    if beta < 0:
        raise ValueError(f"{BETA_KEY} must be >= 0, got {beta}")
    if form not in AT_FORMS:
        raise ValueError(f"{FORM_KEY} must be one of {', '.join(AT_FORMS)}, got {form!r}")


def attention_map(feature_map: torch.Tensor, p: int = 2) -> torch.Tensor:
    """Q = vec(Σ_c |f_c|^p) for a batch of maps N × C × H × W → N × (H·W) (eqs. 5.4–5.5)."""
    if feature_map.dim() != 4:
        raise ValueError(f"attention maps need N × C × H × W feature maps, got shape {tuple(feature_map.shape)}")
    return feature_map.abs().pow(p).sum(dim=1).flatten(1)


def normalised_attention(feature_map: torch.Tensor, p: int = 2) -> torch.Tensor:
    """Q / ‖Q‖₂ per sample."""
    return F.normalize(attention_map(feature_map, p), dim=1)


def attention_transfer_loss(
    student_maps: Mapping[str, torch.Tensor],
    teacher_maps: Mapping[str, torch.Tensor],
    levels: Sequence[str],
    form: ATForm = "reference",
) -> torch.Tensor:
    """L_AT summed over ``levels`` (the β factor excluded; see the module docstring for the two forms).

    ``reference`` returns ½ Σ_l mean (Q̂_s − Q̂_t)², so that β·L_AT is the reference code's β/2 · Σ at_loss.
    Teacher maps are detached.
    """
    if not levels:
        raise ValueError("attention transfer needs at least one level")
    terms = []
    for level in levels:
        difference = normalised_attention(student_maps[level]) - normalised_attention(teacher_maps[level].detach())
        if form == "reference":
            terms.append(0.5 * difference.pow(2).mean())
        elif form == "thesis":
            terms.append(difference.norm(dim=1).mean())
        else:
            raise ValueError(f"{FORM_KEY} must be one of {', '.join(AT_FORMS)}, got {form!r}")
    return torch.stack(terms).sum()


def levels_for_step(step: Step, metadata_level: str, levels: Sequence[str] = AT_LEVELS) -> tuple[str, ...]:
    """The AT levels a step compares: all of I in step 1 (and the client refinement), none in step 2,
    I_sub = the levels at or below the metadata level in step 3 (eq. 5.17)."""
    if metadata_level not in AT_LEVELS:
        raise ValueError(f"{LEVEL_KEY} must be one of {', '.join(AT_LEVELS)}, got {metadata_level!r}")
    if step == 1:
        return tuple(levels)
    if step == 2:
        return ()
    if step == 3:
        inside = AT_LEVELS[: AT_LEVELS.index(metadata_level) + 1]
        return tuple(level for level in levels if level in inside)
    raise ValueError(f"FedAT server steps are 1, 2 and 3, got {step!r}")


def global_copy(global_model: SplitModel) -> SplitModel:
    """A fresh, independent copy of w_g^t for one client's three steps (Alg. 3 line 11)."""
    return copy.deepcopy(global_model)


def prepare_step(
    model: SplitModel, step: Step, level: str, theta_batchnorm: ThetaBatchNorm = "train"
) -> list[nn.Parameter]:
    """Set which parameters a server step may change and return them (the only ones to give the optimiser).

    Step 1: the whole model, train mode. Step 2: θ (stages above ``level``) trains; φ is frozen and in eval mode
    (it is not run: metadata enter at ``level``). Step 3: φ trains; θ's weights are frozen; θ stays in train mode
    (BatchNorm on batch statistics) with ``theta_batchnorm="train"``, or is put in eval mode with ``"frozen"``, so
    that its BatchNorm statistics do not move either.
    """
    if step not in (1, 2, 3):
        raise ValueError(f"FedAT server steps are 1, 2 and 3, got {step!r}")
    model.train()
    for p in model.parameters():
        p.requires_grad_(True)
    if step == 1:
        return list(model.parameters())
    if theta_batchnorm not in THETA_BATCHNORM:
        raise ValueError(f"{THETA_BATCHNORM_KEY} must be one of {', '.join(THETA_BATCHNORM)}, got {theta_batchnorm!r}")
    frozen = model.lower_stages(level) if step == 2 else model.upper_stages(level)
    for stage in frozen:
        if step == 2 or theta_batchnorm == "frozen":
            stage.eval()
        for p in stage.parameters():
            p.requires_grad_(False)
    return [p for p in model.parameters() if p.requires_grad]


def at_step_loss(
    student: SplitModel,
    teacher: SplitModel,
    x: torch.Tensor,
    y: torch.Tensor,
    levels: Sequence[str],
    *,
    beta: float = DEFAULT_BETA,
    form: ATForm = "reference",
) -> torch.Tensor:
    """CE(student(x), y) + β·L_AT(student, teacher) on a batch of D_g (eqs. 5.13, 5.16, 5.19).

    The teacher runs without gradient in eval mode.
    """
    logits, student_maps = forward_with_maps(student, x, levels)
    loss = F.cross_entropy(logits, y)
    if not levels:
        return loss
    with torch.no_grad(), eval_mode(teacher):
        _, teacher_maps = forward_with_maps(teacher, x, levels)
    return loss + beta * attention_transfer_loss(student_maps, teacher_maps, levels, form)


def metadata_step_loss(model: SplitModel, feature_maps: torch.Tensor, y: torch.Tensor, level: str) -> torch.Tensor:
    """Step 2 (eq. 5.15): CE of θ applied to client feature maps taken at ``level``."""
    return F.cross_entropy(model.forward_from(feature_maps, level), y)


def train_server_step(
    model: SplitModel,
    step: Step,
    level: str,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    teacher: SplitModel | None = None,
    epochs: int,
    batch_size: int,
    lr: float,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    beta: float = DEFAULT_BETA,
    form: ATForm = "reference",
    at_levels: Sequence[str] = AT_LEVELS,
    theta_batchnorm: ThetaBatchNorm = "train",
    generator: torch.Generator,
    on_epoch_end: Callable[[int], None] | None = None,
) -> None:
    """Run one FedAT server step in place on ``model`` (a global copy, or a client model for eq. 5.19).

    Steps 1 and 3 train on D_g images (``inputs``) against ``teacher``; step 2 trains on metadata maps taken at
    ``level``. Only the parameters ``prepare_step`` allows are given to SGD, so nothing else can change. The model
    is left in train mode with every parameter trainable again. ``on_epoch_end`` is called with the number of
    epochs done after each epoch (e.g. to copy the model after some epoch counts of one run, the optimiser
    continuing); it must not change ``model`` or its train/eval modes.
    """
    params = prepare_step(model, step, level, theta_batchnorm)
    levels = levels_for_step(step, level, at_levels)
    if step != 2 and teacher is None:
        raise ValueError(f"step {step} needs the teacher model for attention transfer")
    sgd = torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    for epoch in range(epochs):
        order = torch.randperm(len(labels), generator=generator).to(labels.device)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            if step == 2:
                loss = metadata_step_loss(model, inputs[batch], labels[batch], level)
            else:
                assert teacher is not None
                loss = at_step_loss(model, teacher, inputs[batch], labels[batch], levels, beta=beta, form=form)
            sgd.zero_grad(set_to_none=True)
            loss.backward()
            sgd.step()
        if on_epoch_end is not None:
            on_epoch_end(epoch + 1)
    settle_trained_part(model, step, level, inputs, batch_size, theta_batchnorm)
    model.train()
    for p in model.parameters():
        p.requires_grad_(True)


def settle_trained_part(
    model: SplitModel,
    step: Step,
    level: str,
    inputs: torch.Tensor,
    batch_size: int,
    theta_batchnorm: ThetaBatchNorm = "train",
) -> None:
    """End a server step as every training ends (``models/batchnorm.py``): the BatchNorm statistics of the part the
    step ran in train mode become those of the step's inputs, dropout off; a part in eval mode keeps its own. In
    step 3 with ``theta_batchnorm="train"`` that is the whole model on D_g (θ's statistics become those of
    φ_{g,s3}'s maps); with ``"frozen"`` only φ."""
    if step == 1 or (step == 3 and theta_batchnorm == "train"):
        settle_batchnorm(model, inputs, batch_size=batch_size)
    elif step == 2:
        settle_batchnorm(
            model,
            inputs,
            forward=lambda h: model.forward_from(h, level),
            within=model.upper_stages(level),
            batch_size=batch_size,
        )
    else:
        settle_batchnorm(
            model,
            inputs,
            forward=lambda x: model.forward_to(x, level),
            within=model.lower_stages(level),
            batch_size=batch_size,
        )


def aggregate_global_copies(
    states: Sequence[Mapping[str, torch.Tensor]], sizes: Sequence[int]
) -> dict[str, torch.Tensor]:
    """w_g^{t+1} = Σ_k p_k w_{g,s3}^(k) with p_k = |D_k| / Σ_j |D_j| (eq. 5.18)."""
    return average_states(states, [float(s) for s in sizes])


def check_pairing(
    client_model: SplitModel,
    global_model: SplitModel,
    input_shape: Sequence[int],
    metadata_level: str,
    at_levels: Sequence[str] = AT_LEVELS,
) -> dict[str, tuple[int, ...]]:
    """Check that a client model and the global model pair up; return the per-level feature-map shapes.

    Attention transfer needs the same H × W at every AT level (channels may differ: A sums them out); metadata
    training needs the full C × H × W at ``metadata_level`` to be equal, because the client's maps enter the
    global model's θ there. Refuses, naming the key, when a level is missing or the shapes differ.
    """
    for key, wanted in ((LEVEL_KEY, [metadata_level]), (AT_LEVELS_KEY, list(at_levels))):
        for level in wanted:
            for role, model in (("client", client_model), ("global", global_model)):
                if level not in model.levels:
                    raise ValueError(
                        f"{key}: the {role} model has no level {level!r} (it has {', '.join(model.levels)})"
                    )
    levels = sorted(set(at_levels) | {metadata_level}, key=list(global_model.levels).index)
    client_shapes = feature_map_shapes(client_model, input_shape, levels)
    global_shapes = feature_map_shapes(global_model, input_shape, levels)
    for level in at_levels:
        c, g = client_shapes[level], global_shapes[level]
        if len(c) != 3 or len(g) != 3 or c[1:] != g[1:]:
            raise ValueError(
                f"{AT_LEVELS_KEY}: attention maps at {level!r} cannot pair, client maps {c} vs global maps {g} "
                "(need C × H × W with equal H × W)"
            )
    if client_shapes[metadata_level] != global_shapes[metadata_level]:
        raise ValueError(
            f"{LEVEL_KEY}: client feature maps at {metadata_level!r} have shape {client_shapes[metadata_level]}, "
            f"the global model's θ expects {global_shapes[metadata_level]}"
        )
    return global_shapes


def inherit_from_global(
    client_state: Mapping[str, torch.Tensor], global_state: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """A client's first model as the global model reduced to the client's architecture: every entry of
    ``client_state`` that ``global_state`` holds under the same key with the same shape becomes a copy of the global
    model's; the others stay as given. For a WRN-d-1 client of a WRN-D-1 global model (d < D) that is the stem, the
    first (d − 4)/6 blocks of each group, the head and their BatchNorm statistics: the global model with blocks
    removed (thesis §5.1.2: client models made "by reducing the block size from teacher models"). Then φ_k and φ_g
    compute related features at the metadata level from the start, which step 2 needs: θ_g trained on φ_k's maps
    must read φ_g's (Table 5.4)."""
    return {
        key: global_state[key].detach().clone()
        if key in global_state and global_state[key].shape == value.shape
        else value
        for key, value in client_state.items()
    }


def not_inheritable(client_state: Mapping[str, torch.Tensor], global_state: Mapping[str, torch.Tensor]) -> list[str]:
    """The entries of ``client_state`` that ``inherit_from_global`` cannot take from the global model."""
    return [
        key for key, value in client_state.items() if key not in global_state or global_state[key].shape != value.shape
    ]


def three_steps(
    global_model: SplitModel,
    client_model: SplitModel,
    generic_inputs: torch.Tensor,
    generic_labels: torch.Tensor,
    metadata: torch.Tensor,
    metadata_labels: torch.Tensor,
    *,
    level: str,
    at_epochs: int,
    at_lr: float,
    metadata_epochs: int,
    metadata_lr: float,
    batch_size: int,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    beta: float = DEFAULT_BETA,
    form: ATForm = "reference",
    at_levels: Sequence[str] = AT_LEVELS,
    step3_attention: bool = True,
    theta_batchnorm: ThetaBatchNorm = "train",
    generator: torch.Generator,
) -> SplitModel:
    """w_{g,s3}^(k): steps 1–3 of Alg. 3 (lines 11–16) for one client on a fresh copy of ``global_model``, which is
    left unchanged. AT compares ``at_levels`` (I) in step 1 and those of them inside φ (I_sub) in step 3;
    ``step3_attention=False`` drops AT from step 3 (Table 5.4's "w/o AT"); ``metadata_epochs=0`` drops step 2 (the
    ablation without metadata)."""
    copy = global_copy(global_model)
    common = {"batch_size": batch_size, "momentum": momentum, "weight_decay": weight_decay, "generator": generator}
    at = {"teacher": client_model, "epochs": at_epochs, "lr": at_lr, "beta": beta, "form": form}
    train_server_step(copy, 1, level, generic_inputs, generic_labels, at_levels=at_levels, **at, **common)  # type: ignore[arg-type]
    if metadata_epochs > 0:
        train_server_step(copy, 2, level, metadata, metadata_labels, epochs=metadata_epochs, lr=metadata_lr, **common)  # type: ignore[arg-type]
    step3_levels = at_levels if step3_attention else ()
    train_server_step(
        copy,
        3,
        level,
        generic_inputs,
        generic_labels,
        at_levels=step3_levels,
        theta_batchnorm=theta_batchnorm,
        **at,  # type: ignore[arg-type]
        **common,  # type: ignore[arg-type]
    )
    return copy


def refine_client(
    client_model: SplitModel,
    global_model: SplitModel,
    generic_inputs: torch.Tensor,
    generic_labels: torch.Tensor,
    *,
    epochs: int,
    lr: float,
    batch_size: int,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    beta: float = DEFAULT_BETA,
    form: ATForm = "reference",
    at_levels: Sequence[str] = AT_LEVELS,
    generator: torch.Generator,
) -> None:
    """w_k^{t+1} (eqs. 5.19–5.20): the client model, from w_{k,E}, trained in place on D_g with CE + β·AT at
    ``at_levels`` (I), the new global model as teacher."""
    train_server_step(
        client_model,
        1,
        AT_LEVELS[-1],
        generic_inputs,
        generic_labels,
        teacher=global_model,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        momentum=momentum,
        weight_decay=weight_decay,
        beta=beta,
        form=form,
        at_levels=at_levels,
        generator=generator,
    )
