"""Malformed manifests: every problem is reported at once, each as `FILE:LINE:COL: path: message`.

Each case is a small YAML file in tmp_path: the four-line header of `conftest.HEADER`
(apiVersion, kind, metadata.name) and a body from line 5. The expected strings are checked
twice: from `check_manifest` and from the stderr of `trainops validate`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from inspect import signature
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trainops.cli.main import main
from trainops.errors import ManifestError, NotFoundError
from trainops.manifest import check_manifest, load_manifest

WriteManifest = Callable[[str], Path]
AGAIN = "; fix it and run `trainops validate` again"


@dataclass(frozen=True)
class Case:
    id: str
    body: str
    expected: tuple[str, ...]  # "LINE:COL: path: message", in the order they are reported


CASES = [
    Case(
        "unknown-key-did-you-mean",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    schedular: volcano\n",
        ("9:5: spec.train.schedular: unknown field 'schedular'; did you mean 'scheduler'?",),
    ),
    Case(
        "unknown-top-key-did-you-mean",
        "spec:\n  regsitry: file://x\n",
        ("6:3: spec.regsitry: unknown field 'regsitry'; did you mean 'registry'?",),
    ),
    Case(
        "snake-case-key",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    gpus_per_node: 2\n",
        (
            "9:5: spec.train.gpus_per_node: unknown field 'gpus_per_node'; "
            "did you mean 'gpusPerNode'? (keys are camelCase)",
        ),
    ),
    Case(
        "unknown-key-lists-allowed",
        "spec:\n  release:\n    source: m:1\n    zzz: 1\n",
        (
            "8:5: spec.release.zzz: unknown field 'zzz'; allowed: annotations, exclude, "
            "export, include, repository, requireGates, signing, source, tag",
        ),
    ),
    Case(
        "missing-required-field",
        "spec:\n  image: {}\n  train:\n    nodes: 2\n",
        ("7:3: spec.train.command: missing required field 'command'",),
    ),
    Case(
        "missing-top-level-fields",
        "",
        ("1:1: spec: missing required field 'spec'",),
    ),
    Case(
        "wrong-type-scalar",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    nodes: two\n",
        ("9:12: spec.train.nodes: should be a valid integer (got 'two')",),
    ),
    Case(
        "number-as-string",  # strict: YAML's "8" is a string, never coerced into gpusPerNode's integer
        'spec:\n  image: {}\n  train:\n    command: [python]\n    gpusPerNode: "8"\n',
        ("9:18: spec.train.gpusPerNode: should be a valid integer (got '8')",),
    ),
    Case(
        "empty-metadata",  # `metadata:` with nothing under it: name is what is missing
        "apiVersion: trainops.dev/v1alpha1\nkind: Pipeline\nmetadata:\nspec: {}\n",
        ("3:1: metadata: is empty: missing required field 'name'",),
    ),
    Case(
        "wrong-type-list",
        "spec:\n  image: {}\n  train:\n    command: python\n",
        ("8:14: spec.train.command: should be a list (got 'python')",),
    ),
    Case(
        "wrong-type-string",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    env: {A: 1}\n",
        ("9:14: spec.train.env.A: should be a valid string (got 1)",),
    ),
    Case(
        "enum-value",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    scheduler: k8s\n",
        (
            "9:16: spec.train.scheduler: should be 'volcano', 'kueue', 'kubeflow', 'pytorchjob', 'ray', 'kubernetes', "
            "'slurm' or 'local' (got 'k8s')",
        ),
    ),
    Case(
        "bad-duration",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    maxRunDuration: 5 minutes\n",
        ("9:21: spec.train.maxRunDuration: should be a duration such as 30s, 5m or 1h30m (got '5 minutes')",),
    ),
    Case(
        "bad-quantity",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    resources: {memory: 64GB}\n",
        ("9:25: spec.train.resources.memory: should be a quantity such as 8, 500m or 64Gi (got '64GB')",),
    ),
    Case(
        "bad-quantity-or-int",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    resources: {cpu: 2x}\n",
        (
            "9:22: spec.train.resources.cpu: should be a quantity such as 8, 500m or 64Gi "
            "or should be a valid integer (got '2x')",
        ),
    ),
    Case(
        "bad-dns-name",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    namespace: My_NS\n",
        ("9:16: spec.train.namespace: should be a DNS-1123 label (lowercase letters, digits and '-') (got 'My_NS')",),
    ),
    Case(
        "header-values",
        "apiVersion: trainops.dev/v1\nkind: Pipe\nmetadata: {name: Demo}\nspec: {}\n",
        (
            "1:13: apiVersion: should be 'trainops.dev/v1alpha1' (got 'trainops.dev/v1')",
            "2:7: kind: should be 'Pipeline' (got 'Pipe')",
            "3:18: metadata.name: should be a DNS-1123 label (lowercase letters, digits and '-') (got 'Demo')",
        ),
    ),
    Case(
        "out-of-range",
        "spec:\n  rollout:\n    model: m:1\n    replicas: 0\n",
        ("8:15: spec.rollout.replicas: should be greater than or equal to 1 (got 0)",),
    ),
    Case(
        "empty-command",
        "spec:\n  image: {}\n  train:\n    command: []\n",
        ("8:5: spec.train.command: should have at least 1 item",),
    ),
    Case(
        "empty-command-word",
        "spec:\n  image: {}\n  train:\n    command: [python, '']\n",
        ("8:23: spec.train.command[1]: should have at least 1 character (got '')",),
    ),
    Case(
        "bad-image-ref",
        "spec:\n  image:\n    builder: layer\n    base: Not An Image\n",
        ("8:11: spec.image.base: 'Not An Image' is not an image reference such as registry.example.com/team/base:1.0",),
    ),
    Case(
        "bad-git-url",
        "spec:\n  gitops: {repo: not a url}\n",
        (
            "6:18: spec.gitops.repo: 'not a url' is not a git URL; use file://PATH, "
            "https://HOST/REPO.git, ssh://… or user@host:repo",
        ),
    ),
    # --- every cross-field validator of the models ---
    Case(
        "layer-builder-without-base",
        "spec:\n  image: {builder: layer}\n",
        ("6:3: spec.image: the layer builder appends to a base image: set base",),
    ),
    Case(
        "duplicate-secret-ids",
        "spec:\n  image:\n    secrets:\n      - {id: tok, env: TOK}\n      - {id: tok, file: /x}\n",
        ("6:3: spec.image: secret ids must be unique",),
    ),
    Case(
        "secret-without-source",
        "spec:\n  image:\n    secrets: [{id: tok}]\n",
        ("7:15: spec.image.secrets[0]: set exactly one of env or file as the source of the secret",),
    ),
    Case(
        "secret-with-two-sources",
        "spec:\n  image:\n    secrets: [{id: tok, env: TOK, file: /t}]\n",
        ("7:15: spec.image.secrets[0]: set exactly one of env or file as the source of the secret",),
    ),
    Case(
        "build-arg-and-secret",
        "spec:\n  image:\n    secrets: [{id: A1, env: A1}]\n    buildArgs: {A1: x}\n",
        ("6:3: spec.image: 'A1' is both a build arg and a secret; keep it a secret",),
    ),
    Case(
        "best-without-metric",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    checkpoint:\n      keep: {best: 2}\n",
        ("10:7: spec.train.checkpoint.keep: keeping the best checkpoints needs a metric to rank them: set metric",),
    ),
    Case(
        "local-scheduler-many-nodes",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    scheduler: local\n    nodes: 2\n",
        ("7:3: spec.train: the local scheduler runs one node: set nodes: 1 or pick a cluster scheduler",),
    ),
    Case(
        "slurm-options-without-slurm",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    slurm: {partition: p}\n",
        ("7:3: spec.train: slurm options are set but scheduler is not slurm",),
    ),
    Case(
        "kueue-options-without-kueue",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    kueue: {workload: job}\n",
        ("7:3: spec.train: kueue options are set but scheduler is not kueue",),
    ),
    Case(
        "elastic-outside-pytorchjob",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    elastic: {minNodes: 1, maxNodes: 2}\n",
        ("7:3: spec.train: elastic training needs scheduler: pytorchjob (Kubeflow Trainer v2 has no elastic policy)",),
    ),
    Case(
        "elastic-nodes-out-of-range",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    scheduler: pytorchjob\n"
        "    nodes: 5\n    elastic: {minNodes: 1, maxNodes: 2}\n",
        ("7:3: spec.train: nodes must lie between elastic.minNodes and elastic.maxNodes",),
    ),
    Case(
        "elastic-min-above-max",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    scheduler: pytorchjob\n"
        "    elastic: {minNodes: 3, maxNodes: 2}\n",
        ("10:5: spec.train.elastic: minNodes must not exceed maxNodes",),
    ),
    Case(
        "env-and-secret-env",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    env: {TOKEN: x}\n"
        "    secretEnv:\n      TOKEN: {secret: s, key: k}\n",
        ("7:3: spec.train: 'TOKEN' is in both env and secretEnv",),
    ),
    Case(
        "duplicate-datasets",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    datasets:\n"
        "      - {name: d, ref: x}\n      - {name: d, ref: y}\n",
        ("7:3: spec.train: dataset names must be unique",),
    ),
    Case(
        "unknown-tag-placeholder",
        "spec:\n  image: {}\n  train:\n    command: [python]\n  release: {tag: 'v-{sha}', source: 'm:1'}\n",
        ("9:3: spec.release: unknown placeholder {sha} in tag; use step, commit, run, date",),
    ),
    Case(
        "canary-weights-decreasing",
        "spec:\n  rollout:\n    model: m:1\n    canary:\n      steps: [{weight: 50}, {weight: 10}]\n",
        ("8:5: spec.rollout.canary: canary weights must not decrease: [50, 10]",),
    ),
    Case(
        "parallelism-mismatch",
        "spec:\n  rollout:\n    model: m:1\n    gpusPerReplica: 4\n    tensorParallel: 2\n",
        ("6:3: spec.rollout: tensorParallel × pipelineParallel (2×1) must equal gpusPerReplica (4)",),
    ),
    Case(
        "kserve-with-ab-test",
        "spec:\n  rollout:\n    model: m:1\n    traffic: kserve\n    abTest: {match: [{header: x-a, value: b}]}\n",
        ("6:3: spec.rollout: kserve splits traffic by weight only: abTest needs argo-rollouts or gateway-api",),
    ),
    Case(
        "kserve-standard-with-canary",
        "spec:\n  rollout:\n    model: m:1\n    traffic: kserve\n    kserveDeploymentMode: Standard\n"
        "    canary:\n      steps: [{weight: 10}]\n",
        (
            "10:5: spec.rollout.canary: kserveDeploymentMode Standard ignores canaryTrafficPercent (each release "
            "would take 100% at once): use kserveDeploymentMode Knative or traffic gateway-api, or remove canary",
        ),
    ),
    Case(
        "gateway-api-without-gateway",
        "spec:\n  rollout:\n    model: m:1\n    traffic: gateway-api\n",
        ("6:3: spec.rollout: traffic gateway-api needs gateway: the parent Gateway of the route",),
    ),
    Case(
        "analysis-without-canary",
        "spec:\n  rollout:\n    model: m:1\n    analysis:\n"
        "      thresholds: [{metric: a, query: q, op: '<', value: 1}]\n",
        ("6:3: spec.rollout: analysis runs during a canary: add canary steps",),
    ),
    Case(
        "train-without-image",
        "spec:\n  train:\n    command: [python]\n",
        ("5:1: spec: train needs an image: add an image section or set train.image",),
    ),
    Case(
        "rollout-without-release-or-model",
        "spec:\n  rollout: {}\n",
        ("5:1: spec: rollout has nothing to serve: add a release section or set rollout.model",),
    ),
    Case(
        "eval-without-train",
        "spec:\n  eval:\n    command: [python]\n",
        ("5:1: spec: eval has no train stage to take a checkpoint from: set eval.checkpoint to a reference",),
    ),
    Case(
        "release-without-train",
        "spec:\n  release: {source: latest}\n",
        ("5:1: spec: release has no train stage: set release.source to a checkpoint reference",),
    ),
    Case(
        "release-best-without-metric",
        "spec:\n  image: {}\n  train:\n    command: [python]\n  release: {}\n",
        ("5:1: spec: release.source best needs train.checkpoint.keep.metric to rank checkpoints",),
    ),
    Case(
        "duplicate-tenants",
        "spec:\n  tenants:\n    - name: a\n    - name: a\n",
        ("5:1: spec: tenant names must be unique",),
    ),
    Case(
        "tenant-quota-order",
        "spec:\n  tenants:\n    - name: a\n      gpus: {guarantee: 8, deserved: 4}\n",
        ("8:7: spec.tenants[0].gpus: quota must satisfy guarantee ≤ deserved ≤ capability",),
    ),
    Case(
        "registry-url-scheme",
        "spec:\n  registry: http://example.com\n",
        (
            "6:13: spec.registry: 'http://example.com' is not a registry URL; use file://PATH, "
            "oci://HOST/NAMESPACE or s3://BUCKET/PREFIX",
        ),
    ),
    Case(
        "s3-bucket-too-short",
        "spec:\n  registry: s3://ab/prefix\n",
        ("6:13: spec.registry: 's3://ab/prefix': an S3 bucket name has at least 3 characters",),
    ),
    Case(
        "relative-checkpoint-dir",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    checkpoint: {dir: ckpt}\n",
        ("9:23: spec.train.checkpoint.dir: 'ckpt' must be an absolute path in the container, such as /ckpt",),
    ),
    Case(
        "gitops-path-dotdot",
        "spec:\n  gitops: {path: clusters/../../etc}\n",
        ("6:18: spec.gitops.path: 'clusters/../../etc' must be a relative path inside the repository, without '..'",),
    ),
    Case(
        "gitops-path-absolute",
        "spec:\n  gitops: {path: /etc}\n",
        ("6:18: spec.gitops.path: '/etc' must be a relative path inside the repository, without '..'",),
    ),
    # --- several problems in one file: all of them, in line order ---
    Case(
        "several-in-line-order",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    schedular: volcano\n"
        "    nodes: two\n  registry: ftp://x\n  gitops: {path: ../x}\n",
        (
            "9:5: spec.train.schedular: unknown field 'schedular'; did you mean 'scheduler'?",
            "10:12: spec.train.nodes: should be a valid integer (got 'two')",
            "11:13: spec.registry: 'ftp://x' is not a registry URL; use file://PATH, "
            "oci://HOST/NAMESPACE or s3://BUCKET/PREFIX",
            "12:18: spec.gitops.path: '../x' must be a relative path inside the repository, without '..'",
        ),
    ),
    Case(
        "duplicate-keys-with-schema-errors",
        "spec:\n  image: {}\n  train:\n    command: [python]\n    nodes: 1\n    nodes: 2\n    scheduler: k8s\n",
        (
            "10:5: duplicate key 'nodes' (first written at line 9)",
            "11:16: spec.train.scheduler: should be 'volcano', 'kueue', 'kubeflow', 'pytorchjob', 'ray', 'kubernetes', "
            "'slurm' or 'local' (got 'k8s')",
        ),
    ),
    Case(
        "errors-in-several-sections",
        "spec:\n  image: {builder: layer}\n  rollout:\n    model: m:1\n    port: 0\n  tenants:\n    - name: Team\n",
        (
            "6:3: spec.image: the layer builder appends to a base image: set base",
            "9:11: spec.rollout.port: should be greater than or equal to 1 (got 0)",
            "11:13: spec.tenants[0].name: should be a DNS-1123 label (lowercase letters, digits and '-') (got 'Team')",
        ),
    ),
]


def _run_cli(*args: str) -> tuple[int, str, str]:
    """`trainops ARGS` in click's isolation: exit code, stdout, stderr."""
    kwargs: dict[str, Any] = {}
    if "mix_stderr" in signature(CliRunner).parameters:
        kwargs["mix_stderr"] = False
    with CliRunner(**kwargs).isolation() as streams:
        code = main(list(args))
        sys.stdout.flush()
        sys.stderr.flush()
    return code, streams[0].getvalue().decode(), streams[1].getvalue().decode()


def _run_validate(path: Path) -> tuple[int, str, str]:
    return _run_cli("validate", "-f", str(path))


def _expected_stderr(problems: Sequence[str]) -> list[str]:
    if len(problems) == 1:
        return [f"Error: {problems[0]}{AGAIN}"]
    many = "; fix them and run `trainops validate` again"
    return [*problems, f"Error: {len(problems)} problems in the manifest{many}"]


def test_the_table_is_large_and_its_ids_unique() -> None:
    assert len(CASES) >= 25
    assert len({c.id for c in CASES}) == len(CASES)


def test_the_header_alone_with_an_empty_spec_is_valid(manifest: WriteManifest) -> None:
    assert check_manifest(manifest("spec: {}\n")).ok


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_check_manifest_reports_each_problem_located(manifest: WriteManifest, case: Case) -> None:
    path = manifest(case.body)
    report = check_manifest(path)
    assert [str(p) for p in report.problems] == [f"{path}:{e}" for e in case.expected]
    assert not report.ok
    for problem in report.problems:
        assert problem.file == str(path)
        assert problem.env is None


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_trainops_validate_prints_the_same_problems(manifest: WriteManifest, case: Case) -> None:
    path = manifest(case.body)
    code, out, err = _run_validate(path)
    assert code == 3
    assert out == ""
    assert err.splitlines() == _expected_stderr([f"{path}:{e}" for e in case.expected])


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_load_manifest_raises_with_the_same_problems(manifest: WriteManifest, case: Case) -> None:
    path = manifest(case.body)
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    problems = sorted(caught.value.problems, key=lambda p: (p.line, p.column))
    assert [str(p) for p in problems] == [f"{path}:{e}" for e in case.expected]
    assert caught.value.exit_code == 3


def test_a_key_error_points_at_the_key_not_its_value(manifest: WriteManifest) -> None:
    """`env: {bad-name: x}`: the name is wrong, so the column is that of `bad-name`."""
    path = manifest("spec:\n  image: {}\n  train:\n    command: [python]\n    env: {bad-name: x}\n")
    assert [str(p) for p in check_manifest(path).problems] == [
        f"{path}:9:11: spec.train.env.bad-name: should be an environment variable name "
        "(letters, digits, '_') (got 'bad-name')"
    ]


# --- environment overlays -------------------------------------------------------------------

OVERLAID = """\
spec:
  registry: file://.trainops/registry
  image: {}
  train:
    queue: research
    nodes: 2
    command: [python, -m, train]
    env: {A: "1", B: "2"}
    topology: {mode: hard}
environments:
  prod:
    registry: oci://harbor.example.com/llm
    train:
      nodes: 8
      command: [torchrun, train.py]
      env: {B: null, C: "3"}
      topology: null
  dev:
    train: {scheduler: local, nodes: 1}
"""


def test_env_overlay_merges_mappings_replaces_lists_and_null_removes(
    manifest: WriteManifest,
) -> None:
    path = manifest(OVERLAID)
    base = load_manifest(path).pipeline.spec
    prod = load_manifest(path, env="prod")
    spec = prod.pipeline.spec
    assert prod.env == "prod"
    assert spec.registry == "oci://harbor.example.com/llm"  # scalar replaced
    assert spec.train is not None and base.train is not None
    assert spec.train.nodes == 8
    assert spec.train.queue == "research"  # mapping merged: the base's other keys stay
    assert spec.train.command == ["torchrun", "train.py"]  # list replaced, not appended
    assert spec.train.env == {"A": "1", "C": "3"}  # null removed B
    assert spec.train.topology is None  # null removed the section
    # The base is what it was.
    assert base.registry == "file://.trainops/registry"
    assert (base.train.nodes, base.train.command) == (2, ["python", "-m", "train"])
    assert base.train.env == {"A": "1", "B": "2"}
    assert base.train.topology is not None


def test_check_without_env_checks_the_base_and_every_environment(manifest: WriteManifest) -> None:
    report = check_manifest(manifest(OVERLAID))
    assert report.ok
    assert report.environments == ["prod", "dev"]
    assert check_manifest(manifest(OVERLAID), env="dev").environments == ["dev"]


def test_error_in_an_overlay_points_at_the_overlay_line(manifest: WriteManifest) -> None:
    typos = "      nodes: eight\n      gpusPerNod: 8\n"
    path = manifest(OVERLAID.replace("      nodes: 8\n", typos))
    expected = [
        f"{path}:18:14: environments.prod.train.nodes: should be a valid integer (got 'eight')",
        f"{path}:19:7: environments.prod.train.gpusPerNod: unknown field 'gpusPerNod'; did you mean 'gpusPerNode'?",
    ]
    assert [str(p) for p in check_manifest(path, env="prod").problems] == expected
    # Without --env every environment is checked, so the same problems are found.
    report = check_manifest(path)
    assert [str(p) for p in report.problems] == expected
    assert {p.env for p in report.problems} == {"prod"}
    # --env dev does not see prod's mistakes.
    assert check_manifest(path, env="dev").ok
    code, _, err = _run_validate(path)
    assert code == 3
    assert err.splitlines()[:2] == expected


def test_cross_field_error_made_by_an_overlay(manifest: WriteManifest) -> None:
    path = manifest(OVERLAID.replace("scheduler: local, nodes: 1", "scheduler: local"))
    assert [str(p) for p in check_manifest(path).problems] == [
        f"{path}:23:5: environments.dev.train: the local scheduler runs one node: set nodes: 1 or pick a "
        "cluster scheduler"
    ]


def test_unknown_key_directly_in_an_environment(manifest: WriteManifest) -> None:
    path = manifest(OVERLAID.replace("    train: {scheduler", "    trian: {scheduler"))
    assert [str(p) for p in check_manifest(path).problems] == [
        f"{path}:23:5: environments.dev.trian: unknown field 'trian'; did you mean 'train'?"
    ]


def test_error_in_the_base_is_reported_once_not_per_environment(manifest: WriteManifest) -> None:
    path = manifest(OVERLAID.replace("    queue: research\n", "    queue: research\n    x: 1\n"))
    report = check_manifest(path)
    assert report.environments == ["prod", "dev"]
    assert [str(p) for p in report.problems] == [f"{path}:10:5: spec.train.x: unknown field 'x'"]


def test_cross_field_error_in_the_base_is_reported_once(manifest: WriteManifest) -> None:
    """The base breaks a rule of train; both environments overlay train but fix nothing.

    The problem is the base's, and `check_manifest` promises it once, not once per
    environment at the line of each overlay's `train:` key.
    """
    body = OVERLAID.replace("    nodes: 2\n", "    nodes: 2\n    slurm: {partition: p}\n")
    path = manifest(body)
    assert [str(p) for p in check_manifest(path).problems] == [
        f"{path}:8:3: spec.train: slurm options are set but scheduler is not slurm"
    ]


def test_unknown_env_is_not_found_with_did_you_mean(manifest: WriteManifest) -> None:
    path = manifest(OVERLAID)
    for call in (check_manifest, load_manifest):
        with pytest.raises(NotFoundError) as caught:
            call(path, env="prd")
        assert str(caught.value) == (f"environment 'prd' is not defined in {path}; did you mean 'prod'?")
        assert caught.value.exit_code == 4
    with pytest.raises(NotFoundError) as caught:
        check_manifest(path, env="staging")
    assert str(caught.value) == (f"environment 'staging' is not defined in {path}; defined: prod, dev")
    with pytest.raises(NotFoundError) as caught:
        check_manifest(manifest("spec: {}\n"), env="prod")
    assert caught.value.hint == "this manifest defines no environments"


def test_env_overlay_error_reaches_trainops_validate_with_env(manifest: WriteManifest) -> None:
    path = manifest(OVERLAID.replace("      nodes: 8\n", "      nodes: 0\n"))
    code, out, err = _run_validate(path)
    message = f"{path}:18:14: environments.prod.train.nodes: should be greater than or equal to 1 (got 0)"
    assert (code, out, err.splitlines()) == (3, "", [f"Error: {message}{AGAIN}"])
    code, out, err = _run_cli("validate", "-f", str(path), "--env", "dev")
    assert (code, out, err) == (0, f"{path} is valid; environments checked: dev\n", "")
