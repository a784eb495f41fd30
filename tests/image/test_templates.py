"""The standard image templates: golden Dockerfiles, params, `trainops image render`, and errors.

Golden files live in tests/golden/images/; after an intended template change, regenerate
them with TRAINOPS_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.image.helpers import write_tree
from trainops import __version__
from trainops.errors import InputError
from trainops.image.templates import TEMPLATES, render, support_files
from trainops.manifest.stages import ImageSpec
from trainops_testing.cli import REPO, run

GOLDEN = REPO / "tests" / "golden" / "images"
UPDATE = os.environ.get("TRAINOPS_UPDATE_GOLDEN") == "1"

CASES: dict[str, dict[str, Any]] = {
    # Every template with its defaults: what a team gets without writing params.
    "train-pytorch-defaults": {"template": "train-pytorch"},
    "serve-vllm-defaults": {"template": "serve-vllm"},
    "serve-sglang-defaults": {"template": "serve-sglang"},
    # The example's training image: pinned versions, a build arg and a secret on the install steps.
    "train-pytorch-pinned": {
        "template": "train-pytorch",
        "params": {"torchVersion": "2.4.1", "cudaVersion": "12.1", "ncclVersion": "2.20.5", "pythonVersion": "3.10"},
        "buildArgs": {"PIP_INDEX_URL": "https://pypi.org/simple"},
        "secrets": [{"id": "hf_token", "env": "HF_TOKEN"}, {"id": "netrc", "file": "~/.netrc"}],
    },
    # The mode the tests build with Podman: base already has everything, RUN steps busybox can run.
    "train-pytorch-local-base": {
        "template": "train-pytorch",
        "base": "localhost/trainops-test/busybox:latest",
        "params": {
            "installPytorch": False,
            "installProject": False,
            "trainopsRequirement": "",
            "setupCommand": "echo ready > /tmp/ready",
        },
    },
    "serve-vllm-install": {
        "template": "serve-vllm",
        "params": {"installEngine": True, "baseImage": "nvcr.io/nvidia/pytorch:24.10-py3", "port": 8080},
    },
}


def _spec(data: dict[str, Any]) -> ImageSpec:
    return ImageSpec.model_validate(data)


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_dockerfile_matches_golden(case: str) -> None:
    text = render(_spec(CASES[case])).dockerfile
    path = GOLDEN / f"{case}.Dockerfile"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"no golden file {path}: run with TRAINOPS_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{case} changed; regenerate with TRAINOPS_UPDATE_GOLDEN=1 and review"


def test_training_image_has_the_promised_parts() -> None:
    text = render(_spec(CASES["train-pytorch-pinned"])).dockerfile
    assert "FROM nvidia/cuda:12.1.0-devel-ubuntu22.04\n" in text
    assert '"torch==2.4.1"' in text and "https://download.pytorch.org/whl/cu121" in text
    assert '"nvidia-nccl-cu12==2.20.5"' in text and "python3.10 -m venv" in text
    assert "NCCL_DEBUG=" in text and 'TORCH_NCCL_ASYNC_ERROR_HANDLING="1"' in text
    assert "\nUSER 1000:1000\n" in text  # non-root, numeric (runAsNonRoot can verify it)
    assert 'ENTRYPOINT ["/opt/trainops/entrypoint.sh"]' in text
    assert f'pip install --no-cache-dir "trainops=={__version__}"' in text  # the checkpoint agent
    assert "ARG PIP_INDEX_URL\n" in text
    # secrets are mounted into the install steps only, by id, never as values or ARGs
    assert text.count("--mount=type=secret,id=hf_token") == 3  # pytorch, trainops, the project
    assert 'NETRC="$(cat /run/secrets/netrc)"' in text
    assert "ARG HF_TOKEN" not in text and "ENV HF_TOKEN" not in text


def test_base_overrides_the_from_and_the_base_image_param() -> None:
    assert render(_spec({"params": {"baseImage": "nvcr.io/nvidia/pytorch:24.10-py3"}})).base == (
        "nvcr.io/nvidia/pytorch:24.10-py3"
    )
    both = render(_spec({"base": "registry.local/base:1", "params": {"baseImage": "nvcr.io/x:1"}}))
    assert both.base == "registry.local/base:1"
    assert "\nFROM registry.local/base:1\n" in both.dockerfile


def test_render_has_no_per_commit_text() -> None:
    """Labels with the commit are added by the builder: the Dockerfile is the same for every commit."""
    text = render(_spec({})).dockerfile
    assert "org.opencontainers.image.revision" not in text and "dev.trainops.lineage" not in text


def test_unknown_param_names_the_allowed_ones() -> None:
    with pytest.raises(InputError) as err:
        render(_spec({"params": {"torchversion": "2.5.1"}}))
    message = str(err.value)
    assert "no parameter 'torchversion'" in message and "did you mean 'torchVersion'?" in message
    for name in ("baseImage", "torchVersion", "cudaVersion", "ncclVersion", "pythonVersion"):
        assert name in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"cudaVersion": 12.4}, "image.params.cudaVersion must be a string, not 12.4; quote it"),
        ({"cudaVersion": "twelve"}, "image.params.cudaVersion: 'twelve' is not valid; write it like \"12.4.1\""),
        ({"installPytorch": "no"}, "image.params.installPytorch must be true or false, not 'no'"),
        ({"uid": 0}, "image.params.uid must lie between 1 and"),
        ({"setupCommand": "a\nb"}, "image.params.setupCommand must be one line"),
        ({"baseImage": "Not An Image"}, "image.params.baseImage: 'Not An Image' is not valid"),
    ],
)
def test_malformed_params_are_one_line_errors(params: dict[str, Any], expected: str) -> None:
    with pytest.raises(InputError) as err:
        render(_spec({"params": params}))
    assert str(err.value).startswith(expected), str(err.value)
    assert "\n" not in str(err.value)


def test_params_of_another_template_are_unknown() -> None:
    with pytest.raises(InputError, match="template serve-vllm has no parameter 'torchVersion'"):
        render(_spec({"template": "serve-vllm", "params": {"torchVersion": "2.5.1"}}))


def test_templates_use_strict_undefined() -> None:
    import jinja2

    from trainops.templating import render_template

    for template in TEMPLATES.values():
        with pytest.raises(jinja2.UndefinedError):
            render_template(template.file)


def test_support_files_make_a_hook_directory() -> None:
    files = {f.relpath: f for f in support_files()}
    assert files["entrypoint.sh"].mode == 0o755
    assert files["entrypoint.d/README"].mode == 0o644  # documentation, never run as a hook
    script = files["entrypoint.sh"].source.read_text()
    assert 'exec "$@"' in script and "entrypoint.d" in script


# -- the CLI -------------------------------------------------------------------------------

MANIFEST = """\
apiVersion: trainops.dev/v1alpha1
kind: Pipeline
metadata: {name: demo}
spec:
  image:
    template: train-pytorch
    params: {torchVersion: "2.5.1"}
environments:
  old:
    image:
      params: {torchVersion: "2.3.1"}
"""


def test_cli_render_prints_the_dockerfile(tmp_path: Path) -> None:
    write_tree(tmp_path, {"trainops.yaml": MANIFEST})
    result = run("image", "render", "-f", str(tmp_path / "trainops.yaml"))
    assert (result.code, result.stderr) == (0, "")
    assert result.stdout == render(_spec({"params": {"torchVersion": "2.5.1"}})).dockerfile
    old = run("image", "render", "-f", str(tmp_path / "trainops.yaml"), "--env", "old")
    assert '"torch==2.3.1"' in old.stdout


def test_cli_render_json(tmp_path: Path) -> None:
    write_tree(tmp_path, {"trainops.yaml": MANIFEST})
    result = run("image", "render", "-f", str(tmp_path / "trainops.yaml"), "-o", "json")
    data = json.loads(result.stdout)
    assert data["template"] == "train-pytorch" and data["params"]["torchVersion"] == "2.5.1"
    assert data["profile"]["entrypoint"] == ["/opt/trainops/entrypoint.sh"]
    assert data["dockerfile"].startswith("# Training image: PyTorch 2.5.1")


@pytest.mark.parametrize(
    ("replace", "code", "error"),
    [
        ('params: {torchVersion: "2.5.1"}', 3, "image.params: template train-pytorch has no parameter 'torch'"),
        ("template: train-pytorch", 3, "spec.image.template"),
    ],
)
def test_cli_render_errors_are_one_line(tmp_path: Path, replace: str, code: int, error: str) -> None:
    bad = {
        'params: {torchVersion: "2.5.1"}': 'params: {torch: "2.5.1"}',
        "template: train-pytorch": "template: train-jax",
    }[replace]
    write_tree(tmp_path, {"trainops.yaml": MANIFEST.replace(replace, bad, 1)})
    result = run("image", "render", "-f", str(tmp_path / "trainops.yaml"))
    assert result.code == code
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert error in result.stderr


def test_cli_render_without_an_image_section(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {"trainops.yaml": "apiVersion: trainops.dev/v1alpha1\nkind: Pipeline\nmetadata: {name: demo}\nspec: {}\n"},
    )
    result = run("image", "render", "-f", str(tmp_path / "trainops.yaml"))
    assert result.code == 3
    assert result.stderr.startswith("Error: ") and "has no image section; add spec.image" in result.stderr
