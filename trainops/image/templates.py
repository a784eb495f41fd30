"""The standard image templates: their parameters, defaults, runtime profile, and rendering.

Each template is `templates/images/<name>.Dockerfile.j2`, rendered with Jinja2
(StrictUndefined) from the manifest's `image` section: `params` (checked here against the
template's own list, so a misspelt name is an error naming the allowed ones), `base`
(overrides the FROM), `buildArgs` (declared as ARGs) and `secrets` (mounted into the
install steps only).

The *profile* of a template is what it sets at run time — working directory, environment,
entrypoint, command, user — and the support files it adds (the entrypoint and its hook
directory). The docker builder gets them from the rendered Dockerfile; the layer builder,
which runs no Dockerfile, applies the same profile to the base image's config, so both
builders produce images that start the same way.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainops import __version__
from trainops.errors import InputError
from trainops.manifest.stages import ImageSpec
from trainops.templating import render_template, template_root

ParamValue = str | int | float | bool

SUPPORT_DIR = "images/files"  # under templates/: copied to SUPPORT_DEST in every image
SUPPORT_DEST = "opt/trainops"
ENTRYPOINT = f"/{SUPPORT_DEST}/entrypoint.sh"
HOOKS_DIR = f"/{SUPPORT_DEST}/entrypoint.d"


@dataclass(frozen=True)
class Param:
    """One template parameter: its type, default, and what values it accepts."""

    name: str
    kind: type
    default: ParamValue
    help: str
    pattern: str | None = None  # for strings
    minimum: int | None = None  # for integers
    maximum: int | None = None
    example: str = ""

    def check(self, value: Any) -> ParamValue:
        where = f"image.params.{self.name}"
        if self.kind is bool:
            if not isinstance(value, bool):
                raise InputError(f"{where} must be true or false, not {value!r}")
            return value
        if self.kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise InputError(f"{where} must be a whole number, not {value!r}")
            if (self.minimum is not None and value < self.minimum) or (
                self.maximum is not None and value > self.maximum
            ):
                raise InputError(f"{where} must lie between {self.minimum} and {self.maximum}, not {value}")
            return value
        if not isinstance(value, str):
            quoted = f'"{value}"' if isinstance(value, int | float) and not isinstance(value, bool) else "a string"
            raise InputError(
                f"{where} must be a string, not {value!r}",
                hint=f"quote it ({self.name}: {quoted}): YAML reads unquoted versions as numbers",
            )
        if "\n" in value or "\r" in value:
            raise InputError(f"{where} must be one line", hint="join the commands with && on one line")
        if self.pattern and not re.fullmatch(self.pattern, value):
            raise InputError(f"{where}: {value!r} is not valid", hint=f"write it like {self.example}")
        return value


_VERSION = r"[0-9][0-9A-Za-z.+-]{0,63}"
_IMAGE = (
    r"(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._/-][a-z0-9]+)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?"
)


def _common(workdir: str = "/workspace", install_project: bool = True) -> tuple[Param, ...]:
    return (
        Param("user", str, "trainops", "Name of the non-root user.", r"[a-z_][a-z0-9_-]{0,31}", example="trainops"),
        Param("uid", int, 1000, "uid and gid of the non-root user (never 0).", minimum=1, maximum=2**31 - 2),
        Param(
            "workdir",
            str,
            workdir,
            "Where the project's files go; the working directory.",
            r"/[A-Za-z0-9._/-]*",
            example="/workspace",
        ),
        Param(
            "installProject",
            bool,
            install_project,
            "pip-install the project (requirements.txt, then pyproject.toml or setup.py) at build time.",
        ),
        Param(
            "setupCommand",
            str,
            "",
            "One extra shell command run at build time, with the build secrets.",
            r".{0,4000}",
            example='"apt-get install -y git"',
        ),
    )


@dataclass(frozen=True)
class ImageTemplate:
    name: str
    summary: str
    params: tuple[Param, ...]
    default_base: Callable[[Mapping[str, ParamValue]], str]
    derived: Callable[[Mapping[str, ParamValue]], dict[str, str]]
    env: tuple[tuple[str, str], ...]  # static runtime environment (also applied by the layer builder)
    entrypoint_args: tuple[str, ...] = ()  # after the trainops entrypoint
    cmd: tuple[str, ...] = ()
    ports: tuple[int | str, ...] = ()
    labels: Callable[[Mapping[str, ParamValue]], dict[str, str]] = field(default=lambda p: {})

    @property
    def file(self) -> str:
        return f"images/{self.name}.Dockerfile.j2"

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def resolve(self, given: Mapping[str, Any]) -> dict[str, ParamValue]:
        """The params with defaults filled in; an unknown or malformed one is an error."""
        allowed = [p.name for p in self.params]
        for name in given:
            if name not in allowed:
                close = difflib.get_close_matches(name, allowed, n=1)
                guess = f"did you mean {close[0]!r}? " if close else ""
                raise InputError(
                    f"image.params: template {self.name} has no parameter {name!r}",
                    hint=f"{guess}allowed: {', '.join(allowed)}",
                )
        return {p.name: p.check(given[p.name]) if p.name in given else p.default for p in self.params}


def _cuda_parts(params: Mapping[str, ParamValue]) -> tuple[str, str, str]:
    version = str(params["cudaVersion"])
    parts = version.split(".")
    full = version if len(parts) == 3 else f"{version}.0"
    return full, parts[0], parts[0] + parts[1]


def _train_base(params: Mapping[str, ParamValue]) -> str:
    if params.get("baseImage"):
        return str(params["baseImage"])
    full, _, _ = _cuda_parts(params)
    return f"nvidia/cuda:{full}-devel-ubuntu22.04"


def _train_derived(params: Mapping[str, ParamValue]) -> dict[str, str]:
    _, major, nodot = _cuda_parts(params)
    return {"cudaMajor": major, "torchIndexUrl": f"https://download.pytorch.org/whl/cu{nodot}"}


TRAIN_ENV: tuple[tuple[str, str], ...] = (
    ("PYTHONUNBUFFERED", "1"),
    ("PYTHONDONTWRITEBYTECODE", "1"),
    # NCCL: report problems, not chatter; a longer InfiniBand timeout survives fabric hiccups
    # on large jobs (NCCL's default 20 is ~4 s, 22 is ~17 s).
    ("NCCL_DEBUG", "WARN"),
    ("NCCL_IB_TIMEOUT", "22"),
    # torch.distributed: a failed or hung collective raises (so the pod fails and the job
    # restarts from its checkpoint) instead of hanging; one OpenMP thread per rank.
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
    ("TORCH_DISTRIBUTED_DEBUG", "OFF"),
    ("OMP_NUM_THREADS", "1"),
    ("MASTER_PORT", "29500"),
    ("TRAINOPS_HOOKS_DIR", HOOKS_DIR),
)

SERVE_ENV: tuple[tuple[str, str], ...] = (
    ("PYTHONUNBUFFERED", "1"),
    ("DO_NOT_TRACK", "1"),
    ("HF_HUB_DISABLE_TELEMETRY", "1"),
    ("TRAINOPS_HOOKS_DIR", HOOKS_DIR),
)

TEMPLATES: dict[str, ImageTemplate] = {
    "train-pytorch": ImageTemplate(
        name="train-pytorch",
        summary="Distributed training: PyTorch with CUDA and NCCL, a non-root user, start hooks.",
        params=(
            Param(
                "baseImage",
                str,
                "",
                "FROM image (default nvidia/cuda:<cudaVersion>-devel-ubuntu22.04).",
                _IMAGE,
                example="nvcr.io/nvidia/cuda:12.4.1-devel-ubuntu22.04",
            ),
            Param("torchVersion", str, "2.5.1", "PyTorch version.", _VERSION, example='"2.5.1"'),
            Param(
                "cudaVersion",
                str,
                "12.4.1",
                "CUDA version (X.Y or X.Y.Z).",
                r"[0-9]{1,3}\.[0-9]{1,3}(\.[0-9]{1,3})?",
                example='"12.4.1"',
            ),
            Param(
                "ncclVersion", str, "2.21.5", "NCCL version (the nvidia-nccl-cuXX wheel).", _VERSION, example='"2.21.5"'
            ),
            Param("pythonVersion", str, "3.11", "Python version.", r"3\.[0-9]{1,2}", example='"3.11"'),
            Param(
                "installPytorch",
                bool,
                True,
                "Install Python, PyTorch and NCCL; false for a base that has them (NGC PyTorch, a test base).",
            ),
            Param(
                "trainopsRequirement",
                str,
                f"trainops=={__version__}",
                "pip requirement for trainops itself, which the checkpoint restore step and sidecar run; "
                "a wheel URL or git+https URL works too; empty for a base that has it.",
                r"([A-Za-z0-9_.+=<>!~@:/#-][A-Za-z0-9_.+=<>!~@:/# -]{0,299})?",
                example="trainops==" + __version__,
            ),
            *_common(),
        ),
        default_base=_train_base,
        derived=_train_derived,
        env=TRAIN_ENV,
        labels=lambda p: {
            "dev.trainops.template": "train-pytorch",
            "dev.trainops.torch.version": str(p["torchVersion"]),
            "dev.trainops.cuda.version": str(p["cudaVersion"]),
            "dev.trainops.nccl.version": str(p["ncclVersion"]),
            "dev.trainops.python.version": str(p["pythonVersion"]),
        },
    ),
    "serve-vllm": ImageTemplate(
        name="serve-vllm",
        summary="Serving with vLLM's OpenAI-compatible server.",
        params=(
            Param(
                "baseImage",
                str,
                "",
                "FROM image (default vllm/vllm-openai:v<vllmVersion>).",
                _IMAGE,
                example="vllm/vllm-openai:v0.6.4.post1",
            ),
            Param("vllmVersion", str, "0.6.4.post1", "vLLM version.", _VERSION, example='"0.6.4.post1"'),
            Param("installEngine", bool, False, "pip-install vLLM (for a base without it)."),
            Param("port", int, 8000, "Port the server listens on.", minimum=1, maximum=65535),
            *_common(workdir="/app", install_project=False),
        ),
        default_base=lambda p: str(p["baseImage"]) or f"vllm/vllm-openai:v{p['vllmVersion']}",
        derived=lambda p: {},
        env=(*SERVE_ENV, ("VLLM_NO_USAGE_STATS", "1")),
        entrypoint_args=("python3", "-m", "vllm.entrypoints.openai.api_server"),
        cmd=("--host", "0.0.0.0", "--port", "{port}"),
        ports=("{port}",),
        labels=lambda p: {"dev.trainops.template": "serve-vllm", "dev.trainops.vllm.version": str(p["vllmVersion"])},
    ),
    "serve-sglang": ImageTemplate(
        name="serve-sglang",
        summary="Serving with SGLang's OpenAI-compatible server.",
        params=(
            Param(
                "baseImage",
                str,
                "",
                "FROM image (default lmsysorg/sglang:v<sglangVersion>-cu124).",
                _IMAGE,
                example="lmsysorg/sglang:v0.4.1-cu124",
            ),
            Param("sglangVersion", str, "0.4.1", "SGLang version.", _VERSION, example='"0.4.1"'),
            Param("installEngine", bool, False, "pip-install SGLang (for a base without it)."),
            Param("port", int, 30000, "Port the server listens on.", minimum=1, maximum=65535),
            *_common(workdir="/app", install_project=False),
        ),
        default_base=lambda p: str(p["baseImage"]) or f"lmsysorg/sglang:v{p['sglangVersion']}-cu124",
        derived=lambda p: {},
        env=SERVE_ENV,
        entrypoint_args=("python3", "-m", "sglang.launch_server"),
        cmd=("--host", "0.0.0.0", "--port", "{port}"),
        ports=("{port}",),
        labels=lambda p: {
            "dev.trainops.template": "serve-sglang",
            "dev.trainops.sglang.version": str(p["sglangVersion"]),
        },
    ),
}


def get_template(name: str) -> ImageTemplate:
    try:
        return TEMPLATES[name]
    except KeyError:
        raise InputError(f"image.template: no template {name!r}", hint=f"use one of {', '.join(TEMPLATES)}") from None


@dataclass(frozen=True)
class SupportFile:
    """A file the template adds to every image (the entrypoint, hook directory contents)."""

    relpath: str  # under SUPPORT_DEST in the image, under trainops-files/ in the build context
    source: Path
    mode: int


def support_files() -> list[SupportFile]:
    """templates/images/files/*, sorted; the entrypoint and hooks are executable, docs are not."""

    root = template_root() / SUPPORT_DIR
    found: list[SupportFile] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        name = path.name
        doc = name.startswith("README") or name.endswith((".md", ".txt"))
        executable = not doc and (rel == "entrypoint.sh" or rel.startswith("entrypoint.d/"))
        found.append(SupportFile(rel, path, 0o755 if executable else 0o644))
    return sorted(found, key=lambda f: f.relpath)


@dataclass(frozen=True)
class Profile:
    """What the image sets at run time; the layer builder applies it to the base config."""

    workdir: str
    env: tuple[tuple[str, str], ...]
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    user: str  # numeric uid:gid
    ports: tuple[str, ...]


@dataclass(frozen=True)
class SecretUse:
    id: str
    env: str  # the variable the install steps see it as


@dataclass(frozen=True)
class Rendered:
    """A template rendered for one manifest: the Dockerfile and everything the builders need."""

    template: str
    dockerfile: str
    base: str  # the FROM reference
    params: dict[str, ParamValue]
    profile: Profile
    labels: dict[str, str]  # static labels written in the Dockerfile
    build_arg_names: tuple[str, ...]
    secrets: tuple[SecretUse, ...]

    @property
    def uses_secrets(self) -> bool:
        """Whether any build step mounts a secret (only steps that run commands do)."""
        return "--mount=type=secret" in self.dockerfile


def secret_env_name(secret_id: str, env: str | None) -> str:
    """The variable name a build step sees a secret as: its env source, else its id in capitals."""
    if env:
        return env
    name = re.sub(r"[^A-Za-z0-9_]", "_", secret_id).upper()
    return name if not name[:1].isdigit() else f"_{name}"


def _fill(value: str, params: Mapping[str, ParamValue]) -> str:
    return value.format(**params) if "{" in value else value


def render(image: ImageSpec) -> Rendered:
    """Render the image's template with its params; the Dockerfile `trainops image render` prints."""

    template = get_template(image.template)
    params = template.resolve(image.params)
    base = image.base or template.default_base(params)
    profile = Profile(
        workdir=str(params["workdir"]),
        env=template.env,
        entrypoint=(ENTRYPOINT, *template.entrypoint_args),
        cmd=tuple(_fill(c, params) for c in template.cmd),
        user=f"{params['uid']}:{params['uid']}",
        ports=tuple(_fill(str(p), params) for p in template.ports),
    )
    secrets = tuple(SecretUse(s.id, secret_env_name(s.id, s.env)) for s in image.secrets)
    names = [s.env for s in secrets]
    if len(set(names)) != len(names):
        raise InputError(
            "image.secrets: two secrets would reach the build as the same variable",
            hint="give each secret a different env (or id)",
        )
    labels = template.labels(params)
    dockerfile = render_template(
        template.file,
        template=template.name,
        base=base,
        p=params,
        d=template.derived(params),
        env=list(template.env),
        static_labels=sorted(labels.items()),
        build_arg_names=sorted(image.build_args),
        secrets=list(secrets),
        ports=list(profile.ports),
        entrypoint_json=json.dumps(list(profile.entrypoint)),
        cmd_json=json.dumps(list(profile.cmd)) if profile.cmd else "",
    )
    return Rendered(
        template=template.name,
        dockerfile=dockerfile,
        base=base,
        params=params,
        profile=profile,
        labels=labels,
        build_arg_names=tuple(sorted(image.build_args)),
        secrets=secrets,
    )


OWN_PROFILE = Profile(workdir="/", env=(), entrypoint=(), cmd=(), user="0:0", ports=())


def from_base(dockerfile: str) -> str | None:
    """The image of the first FROM line (flags and `AS name` left out), or None."""
    for line in dockerfile.splitlines():
        words = line.strip().split()
        if words and words[0].upper() == "FROM":
            names = [w for w in words[1:] if not w.startswith("--")]
            return names[0] if names else None
    return None


def own_dockerfile(image: ImageSpec, *, text: str, name: str) -> Rendered:
    """A team's own Dockerfile (image.dockerfile) in the shape the docker builder takes."""
    base = image.base or from_base(text)
    if not base or "$" in base:
        raise InputError(
            f"image.dockerfile {name}: cannot tell the base image from its first FROM ({base or 'none'})",
            hint="set image.base to the image the Dockerfile starts FROM",
        )
    return Rendered(
        template=f"dockerfile {name}",
        dockerfile=text,
        base=base,
        params={},
        profile=OWN_PROFILE,
        labels={},
        build_arg_names=tuple(sorted(image.build_args)),
        secrets=tuple(SecretUse(s.id, secret_env_name(s.id, s.env)) for s in image.secrets),
    )
