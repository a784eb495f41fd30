"""What every pod gets: pinned image, resources, /dev/shm, NCCL and the env contract, secrets
as references, the checkpoint restore step and sidecar with their exact commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.render.helpers import DIGEST, IMAGE, RUN_ID, container, env_of, only, render, templates, train, variant
from trainops.errors import InputError
from trainops.manifest import load_manifest
from trainops.render import check_render, render_train, validate_objects
from trainops.render.env import launch_argv
from trainops.render.names import object_name
from trainops_testing import planted
from trainops_testing.projects import example_data

REPO = "file://.trainops/registry/tiny-llm/checkpoints"
KUEUE_JOB = {"scheduler": "kueue", "kueue": {"workload": "job"}, "topology": None}


def _job(tmp_path: Path, overlay: dict[str, Any] | None = None, kind: str = "Job", **kw: Any) -> dict[str, Any]:
    return only(render(variant(tmp_path, overlay), **kw), kind)


def test_the_image_is_pinned_by_digest_everywhere(tmp_path: Path) -> None:
    job = _job(tmp_path)
    for tmpl in templates(job).values():
        spec = tmpl["spec"]
        for item in [*spec["initContainers"], *spec["containers"]]:
            assert item["image"] == IMAGE
            assert item["imagePullPolicy"] == "IfNotPresent"
    env = env_of(container(templates(job)["leader"], "train"))
    assert env["TRAINOPS_IMAGE"] == IMAGE and env["TRAINOPS_IMAGE_DIGEST"] == DIGEST


@pytest.mark.parametrize(
    "image",
    ["harbor.example.com/llm/image:v1", "harbor.example.com/llm/image", "harbor.example.com/llm/image@sha256:abc"],
)
def test_a_mutable_image_is_refused_in_one_line(image: str, tmp_path: Path) -> None:
    manifest = variant(tmp_path)
    with pytest.raises(InputError) as caught:
        render_train(manifest, image=image, run_id=RUN_ID)
    text = str(caught.value)
    assert "\n" not in text and text.startswith(f"image {image!r}")
    assert "pin it by digest: image: HOST/REPOSITORY@sha256:<64 hex>" in text


def test_tag_and_digest_and_oci_scheme_are_accepted(tmp_path: Path) -> None:
    manifest = variant(tmp_path)
    tagged = f"registry.local:5000/team/train:v1@{DIGEST}"
    job = only(render_train(manifest, image=f"oci://{tagged}", run_id=RUN_ID), "Job")
    assert container(templates(job)["leader"], "train")["image"] == tagged


def test_a_file_registry_image_renders_with_a_warning(tmp_path: Path) -> None:
    rendered = render_train(variant(tmp_path), image=f"file:///srv/registry/tiny-llm/image@{DIGEST}", run_id=RUN_ID)
    assert any("cannot pull" in w for w in rendered.warnings)


@pytest.mark.parametrize("run_id", ["Run-1", "run_1", "-run", "r" * 64, ""])
def test_a_run_id_must_be_a_dns_label(run_id: str, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"is not a DNS label"):
        render_train(variant(tmp_path), image=IMAGE, run_id=run_id)


def test_names_carry_the_run_id_and_leave_room_for_pod_hostnames(tmp_path: Path) -> None:
    assert _job(tmp_path)["metadata"]["name"] == f"tiny-llm-{RUN_ID}"
    long_run = "r" + "0" * 61
    job = _job(tmp_path / "long", train({"nodes": 128}), run_id=long_run)
    name = job["metadata"]["name"]
    assert len(name) <= 63 - len("-worker-") - 3
    assert f"{name}-worker-126" and len(f"{name}-worker-126") <= 63
    assert object_name("tiny-llm", long_run, reserve=11) != object_name("tiny-llm", long_run[:-1] + "1", reserve=11)
    assert object_name("7b", "run") == "t7b-run"  # Services need a DNS-1035 label
    assert job["metadata"]["labels"]["trainops.dev/run-id"] == long_run


def test_every_object_is_labelled(tmp_path: Path) -> None:
    for obj in render(variant(tmp_path, train(KUEUE_JOB) | {"spec": {"train": KUEUE_JOB, "patches": None}})).objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "tiny-llm"
        assert labels["app.kubernetes.io/managed-by"] == "trainops"
        assert labels["trainops.dev/pipeline"] == "tiny-llm"
        if obj["kind"] in ("Job", "Service"):
            assert labels["trainops.dev/run-id"] == RUN_ID


def test_gpu_and_rdma_resource_names_are_configurable(tmp_path: Path) -> None:
    overlay = train(
        {
            "gpusPerNode": 4,
            "resources": {"gpuResource": "amd.com/gpu", "rdma": {"resource": "nvidia.com/hostdev", "count": 2}},
        }
    )
    job = _job(tmp_path, overlay)
    resources = container(templates(job)["worker"], "train")["resources"]
    assert resources["limits"]["amd.com/gpu"] == 4 and resources["limits"]["nvidia.com/hostdev"] == 2
    assert resources["requests"] == resources["limits"]  # Guaranteed QoS
    assert "nvidia.com/gpu" not in resources["limits"]


def test_a_bad_resource_name_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"train\.resources\.gpuResource 'nvidia gpu'"):
        render(variant(tmp_path, train({"resources": {"gpuResource": "nvidia gpu"}})))


def test_shared_memory_and_checkpoint_volumes(tmp_path: Path) -> None:
    job = _job(tmp_path, train({"resources": {"sharedMemory": "128Gi"}}))
    spec = templates(job)["leader"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "128Gi"}
    assert volumes["checkpoints"] == {"name": "checkpoints", "emptyDir": {}}
    mounts = {m["mountPath"]: m for m in container(templates(job)["leader"], "train")["volumeMounts"]}
    assert mounts["/dev/shm"]["name"] == "dshm" and mounts["/ckpt"]["name"] == "checkpoints"
    assert mounts["/data"]["readOnly"] is True


def test_a_checkpoint_claim_is_shared_and_restored_once(tmp_path: Path) -> None:
    job = _job(tmp_path, train({"checkpoint": {"claim": "llm-ckpt"}}))
    tmpls = templates(job)
    for tmpl in tmpls.values():
        volumes = {v["name"]: v for v in tmpl["spec"]["volumes"]}
        assert volumes["checkpoints"]["persistentVolumeClaim"] == {"claimName": "llm-ckpt"}
    names = lambda t: [c["name"] for c in t["spec"]["initContainers"]]  # noqa: E731
    assert names(tmpls["leader"]) == ["ckpt-restore", "dataset-corpus", "ckpt-watch"]
    assert names(tmpls["worker"]) == ["dataset-corpus"]


def test_nccl_defaults_hang_detection_and_overrides(tmp_path: Path) -> None:
    overlay = train(
        {
            "nccl": {"NCCL_DEBUG": "INFO", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "1200"},
            "faultTolerance": {"hangTimeout": "15m"},
        }
    )
    env = env_of(container(templates(_job(tmp_path, overlay))["worker"], "train"))
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_IB_TIMEOUT"] == "22"
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1" and env["TORCH_NCCL_ENABLE_MONITORING"] == "1"
    assert env["TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"] == "1200"
    plain = env_of(
        container(templates(_job(tmp_path / "b", train({"faultTolerance": {"hangTimeout": "15m"}})))["worker"], "train")
    )
    assert plain["TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"] == "900"
    assert plain["NCCL_IB_HCA"] == "mlx5"  # the example's train.nccl


def test_the_env_contract(tmp_path: Path) -> None:
    job = _job(tmp_path, commit="0123456789abcdef0123456789abcdef01234567")
    env = env_of(container(templates(job)["leader"], "train"))
    assert env["TRAINOPS_CKPT_DIR"] == "/ckpt"
    assert env["TRAINOPS_RUN_ID"] == RUN_ID and env["TRAINOPS_PIPELINE"] == "tiny-llm"
    assert env["TRAINOPS_CKPT_REPOSITORY"] == REPO
    assert env["TRAINOPS_GIT_COMMIT"] == "0123456789abcdef0123456789abcdef01234567"
    assert env["TRAINOPS_CKPT_EVERY"] == "100"  # train.env
    assert "MASTER_ADDR" not in env  # the Volcano pytorch plugin sets it


def test_reserved_names_are_refused_in_train_env(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"train\.env\.TRAINOPS_RUN_ID is set by trainops"):
        render(variant(tmp_path, train({"env": {"TRAINOPS_RUN_ID": "x"}})))
    with pytest.raises(InputError, match=r"train\.env\.MASTER_ADDR is set by the scheduler"):
        render(variant(tmp_path, train({"env": {"MASTER_ADDR": "x"}})))


def test_secret_env_is_a_reference_and_no_secret_value_is_rendered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = planted.secret("secret-env")
    monkeypatch.setenv("WANDB_API_KEY", secret)
    monkeypatch.setenv("HF_TOKEN", secret)
    overlay = train(
        {
            "secretEnv": {
                "HF_TOKEN": {"secret": "hf", "key": "token"},
                "AWS_SECRET_ACCESS_KEY": {"secret": "s3", "key": "secret"},
            }
        }
    )
    for scheduler in ("volcano", "kueue", "pytorchjob", "slurm"):
        extra: dict[str, Any] = {"scheduler": scheduler, "topology": None}
        if scheduler == "kueue":
            extra["kueue"] = {"workload": "job"}
        manifest = variant(
            tmp_path / scheduler, {"spec": {"train": {**overlay["spec"]["train"], **extra}, "patches": None}}
        )
        rendered = render(manifest)
        for item in rendered.files:
            assert secret not in item.text
    job = _job(tmp_path / "refs", overlay)
    leader = templates(job)["leader"]
    env = env_of(container(leader, "train"))
    assert env["WANDB_API_KEY"] == {"secretKeyRef": {"name": "wandb", "key": "api-key"}}
    assert env["HF_TOKEN"] == {"secretKeyRef": {"name": "hf", "key": "token"}}
    watcher = env_of(container(leader, "ckpt-watch"))
    assert "WANDB_API_KEY" not in watcher and "HF_TOKEN" not in watcher  # agents get only the AWS_* ones
    assert watcher["AWS_SECRET_ACCESS_KEY"] == {"secretKeyRef": {"name": "s3", "key": "secret"}}


def test_a_secret_looking_literal_env_is_warned_about(tmp_path: Path) -> None:
    rendered = render(variant(tmp_path, train({"env": {"HF_TOKEN": "hf_abc", "TOKENIZER": "bpe"}})))
    warnings = [w for w in rendered.warnings if "looks like a secret" in w]
    assert len(warnings) == 1 and "train.env.HF_TOKEN" in warnings[0]


def test_restore_and_sidecar_run_the_exact_commands(tmp_path: Path) -> None:
    keep = {"last": 5, "best": 1, "metric": "val_loss", "mode": "min"}
    tmpls = templates(_job(tmp_path, train({"checkpoint": {"keep": keep}})))
    leader, worker = tmpls["leader"], tmpls["worker"]
    restore = container(leader, "ckpt-restore")
    # the leader restores its node's ranks' shards, a worker its own (1 + its task index)
    ranks = ["--node-rank", "0", "--nproc-per-node", "8", "--world-size", "16"]
    assert restore["command"] == ["trainops", "ckpt", "pull", "--latest", REPO, "/ckpt", *ranks]
    watch = container(leader, "ckpt-watch")
    assert watch["restartPolicy"] == "Always"  # a native sidecar
    assert watch["command"] == [
        "trainops", "ckpt", "watch", "/ckpt", "--repository", REPO, "--run-id", RUN_ID, "--layout", "trainops",
        "--keep-last", "5", "--keep-best", "1", "--metric", "val_loss", "--mode", "min", "--until-signal",
        "--metrics-address", "0.0.0.0:9464",  # the example's training SLOs: the PodMonitor scrapes the sidecar
    ]  # fmt: skip
    assert watch["ports"] == [{"name": "metrics", "containerPort": 9464, "protocol": "TCP"}]
    assert [c["name"] for c in leader["spec"]["initContainers"]][-1] == "ckpt-watch"  # after the restore
    assert "ckpt-watch" not in [c["name"] for c in worker["spec"]["initContainers"]]
    assert container(worker, "ckpt-restore")["command"] == [*restore["command"][:-5], "auto+1", *ranks[2:]]
    assert leader["spec"]["terminationGracePeriodSeconds"] == 600  # checkpoint.gracePeriod


@pytest.mark.parametrize(
    ("overlay", "kind", "leader_template"),
    [
        (train({"scheduler": "pytorchjob", "topology": None}), "PyTorchJob", "leader"),
        (train({"scheduler": "kueue", "topology": None}), "JobSet", "leader"),
    ],
)
def test_the_sidecar_is_only_in_the_rank0_template(
    overlay: dict[str, Any], kind: str, leader_template: str, tmp_path: Path
) -> None:
    overlay["spec"]["patches"] = None
    tmpls = templates(_job(tmp_path, overlay, kind=kind))
    assert set(tmpls) == {"leader", "worker"}
    assert "ckpt-watch" in [c["name"] for c in tmpls[leader_template]["spec"]["initContainers"]]
    assert "ckpt-watch" not in [c["name"] for c in tmpls["worker"]["spec"]["initContainers"]]


def test_the_indexed_job_watcher_is_leader_only_with_the_completion_index(tmp_path: Path) -> None:
    overlay = {"spec": {"train": KUEUE_JOB}}
    tmpl = templates(_job(tmp_path, overlay))["node"]
    watch = container(tmpl, "ckpt-watch")
    assert watch["command"][-4:-2] == ["--until-signal", "--leader-only"]
    rank = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
    assert env_of(watch)["TRAINOPS_NODE_RANK"] == rank
    assert env_of(container(tmpl, "train"))["TRAINOPS_NODE_RANK"] == rank
    restore = container(tmpl, "ckpt-restore")  # each pod restores its own node's shards
    assert env_of(restore)["TRAINOPS_NODE_RANK"] == rank
    assert restore["command"][-6:] == ["--node-rank", "auto", "--nproc-per-node", "8", "--world-size", "16"]


def test_agent_image_and_registry_secret(tmp_path: Path) -> None:
    agent = f"ghcr.io/trainops/agent:1.0@{DIGEST}"
    overlay = train({"checkpoint": {"agentImage": agent, "registrySecret": "harbor-creds"}})
    leader = templates(_job(tmp_path, overlay))["leader"]
    for name in ("ckpt-restore", "ckpt-watch", "dataset-corpus"):
        item = container(leader, name)
        assert item["image"] == agent
        assert (
            env_of(item).get("DOCKER_CONFIG", "/var/run/secrets/trainops/registry")
            == "/var/run/secrets/trainops/registry"
        )
        assert {"name": "registry-auth", "mountPath": "/var/run/secrets/trainops/registry", "readOnly": True} in item[
            "volumeMounts"
        ]
    assert container(leader, "train")["image"] == IMAGE
    volumes = {v["name"]: v for v in leader["spec"]["volumes"]}
    assert volumes["registry-auth"]["secret"]["secretName"] == "harbor-creds"
    assert leader["spec"]["imagePullSecrets"] == [{"name": "harbor-creds"}]
    with pytest.raises(InputError, match=r"train\.checkpoint\.agentImage .* is a mutable tag"):
        render(variant(tmp_path / "tag", train({"checkpoint": {"agentImage": "ghcr.io/trainops/agent:1.0"}})))


def test_numeric_non_root_security_context(tmp_path: Path) -> None:
    leader = templates(_job(tmp_path))["leader"]
    pod = leader["spec"]["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] == 1000 and pod["runAsGroup"] == 1000
    assert pod["fsGroup"] == 1000
    for item in [*leader["spec"]["initContainers"], *leader["spec"]["containers"]]:
        assert item["securityContext"]["allowPrivilegeEscalation"] is False
        assert item["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert container(leader, "train")["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]  # RDMA


def test_resume_none_and_resume_from_a_reference(tmp_path: Path) -> None:
    none = templates(_job(tmp_path, train({"checkpoint": {"resume": "none"}})))["leader"]
    assert "ckpt-restore" not in [c["name"] for c in none["spec"]["initContainers"]]
    seeded = templates(_job(tmp_path / "ref", train({"checkpoint": {"resume": "tiny-llm/base-ckpt:step-1000"}})))[
        "leader"
    ]
    assert container(seeded, "ckpt-seed")["command"] == [
        "trainops", "ckpt", "pull", "file://.trainops/registry/tiny-llm/base-ckpt:step-1000", "/ckpt",
        "--node-rank", "0", "--nproc-per-node", "8", "--world-size", "16",
    ]  # fmt: skip
    names = [c["name"] for c in seeded["spec"]["initContainers"]]
    assert names.index("ckpt-seed") < names.index("ckpt-restore")
    with pytest.raises(InputError, match=r"names no checkpoint"):
        render(variant(tmp_path / "bad", train({"checkpoint": {"resume": "tiny-llm/base-ckpt"}})))


def test_volcano_gang_policies_and_a_single_node(tmp_path: Path) -> None:
    job = _job(tmp_path)
    spec = job["spec"]
    assert spec["minAvailable"] == 2 and spec["schedulerName"] == "volcano" and spec["queue"] == "research"
    assert spec["policies"] == [{"events": ["PodEvicted", "PodFailed"], "action": "RestartJob"}]
    assert spec["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    assert [t["name"] for t in spec["tasks"]] == ["master", "worker"]
    assert templates(job)["leader"]["spec"]["activeDeadlineSeconds"] == 7200
    single = _job(tmp_path / "one", train({"nodes": 1}))
    assert single["spec"]["minAvailable"] == 1 and [t["name"] for t in single["spec"]["tasks"]] == ["master"]


def test_kueue_labels_topology_and_no_suspend(tmp_path: Path) -> None:
    overlay = {"spec": {"train": {**KUEUE_JOB, "topology": {"mode": "hard", "level": "cloud/rack"}}}}
    job = _job(tmp_path, overlay)
    labels = job["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "research"
    assert "kueue.x-k8s.io/priority-class" not in labels  # no WorkloadPriorityClass: Kueue reads the pods'
    assert "suspend" not in job["spec"]
    tmpl = templates(job)["node"]
    assert tmpl["metadata"]["annotations"] == {"kueue.x-k8s.io/podset-required-topology": "cloud/rack"}
    assert tmpl["spec"]["priorityClassName"] == "research-normal"  # the Workload's priority, as Kueue documents
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["parallelism"] == job["spec"]["completions"] == 2
    assert tmpl["spec"]["subdomain"] == job["metadata"]["name"]


def test_kueue_needs_a_topology_level_and_a_queue(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"set train\.topology\.level"):
        render(variant(tmp_path, {"spec": {"train": {**KUEUE_JOB, "topology": {"mode": "hard"}}}}))
    with pytest.raises(InputError, match=r"train\.queue is not set"):
        render(variant(tmp_path / "q", {"spec": {"train": {**KUEUE_JOB, "queue": None}}}))


def test_pytorchjob_fields(tmp_path: Path) -> None:
    overlay = train({"scheduler": "pytorchjob", "topology": None, "gpusPerNode": 0})
    overlay["spec"]["patches"] = None
    job = _job(tmp_path, overlay, kind="PyTorchJob")
    spec = job["spec"]
    assert spec["nprocPerNode"] == "auto"
    assert spec["runPolicy"]["backoffLimit"] == 3 and spec["runPolicy"]["activeDeadlineSeconds"] == 7200
    assert spec["runPolicy"]["schedulingPolicy"] == {
        "minAvailable": 2,
        "queue": "research",
        "priorityClass": "research-normal",
    }
    master = spec["pytorchReplicaSpecs"]["Master"]["template"]
    assert container(master, "pytorch")["ports"] == [
        {"name": "pytorchjob-port", "containerPort": 29500, "protocol": "TCP"}
    ]


def test_commands_are_launched_with_torchrun_unless_they_are_something_else(tmp_path: Path) -> None:
    manifest = variant(tmp_path)
    assert manifest.pipeline.spec.train is not None
    spec = manifest.pipeline.spec.train
    argv = launch_argv(["python3", "-m", "pkg.train", "--lr", "1"], train=spec, endpoint="h:1", run_id="r")
    assert argv[0] == "torchrun" and argv[-4:] == ["-m", "pkg.train", "--lr", "1"]
    mine = launch_argv(["torchrun", "--nproc-per-node=2", "t.py"], train=spec, endpoint="h:1", run_id="r")
    assert mine.index("--nproc-per-node=8") < mine.index("--nproc-per-node=2")  # the command's own option wins
    assert launch_argv(["bash", "run.sh"], train=spec, endpoint="h:1", run_id="r") == ["bash", "run.sh"]


def test_check_render_uses_a_placeholder_and_notes_the_local_scheduler(tmp_path: Path) -> None:
    check = check_render(variant(tmp_path))
    assert check.ok and check.counts == {
        "argoproj.io/v1alpha1 Application": 1,
        "batch.volcano.sh/v1alpha1 Job": 1,
        "monitoring.coreos.com/v1 PodMonitor": 1,
        "monitoring.coreos.com/v1 PrometheusRule": 1,
        "scheduling.volcano.sh/v1beta1 Queue": 1,
        "v1 ConfigMap": 1,
    }
    assert any("cannot reach" in w for w in check.warnings)  # file:// registry
    local = check_render(variant(tmp_path / "l", train({"scheduler": "local", "nodes": 1, "topology": None})))
    assert local.ok and local.objects == 0 and "nothing to render" in local.note


def test_all_objects_validate_for_a_full_featured_manifest(tmp_path: Path) -> None:
    overlay = train(
        {
            "checkpoint": {"claim": "c", "registrySecret": "r", "agentImage": f"a.io/agent@{DIGEST}", "resume": "none"},
            "serviceAccount": "trainer",
            "workingDir": "/workspace",
            "resources": {"ephemeralStorage": "100Gi"},
            "datasets": [{"name": "corpus", "ref": "s3://bucket/data:v1", "mountPath": "/data", "claim": "corpus"}],
            "ttlAfterFinished": "1h",
        }
    )
    rendered = render(variant(tmp_path, overlay))
    assert validate_objects(rendered.objects, sources=rendered.sources) == []


def test_node_selector_and_tolerations_reach_every_pod(tmp_path: Path) -> None:
    overlay = train(
        {
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "maintenance", "value": "soon", "effect": "NoExecute", "tolerationSeconds": 600},
            ],
        }
    )
    rendered = render(variant(tmp_path, overlay))
    assert validate_objects(rendered.objects) == []
    for tmpl in templates(only(rendered, "Job")).values():
        assert tmpl["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        assert tmpl["spec"]["tolerations"] == [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {
                "key": "maintenance",
                "operator": "Equal",
                "value": "soon",
                "effect": "NoExecute",
                "tolerationSeconds": 600,
            },
        ]


def test_without_a_metrics_address_no_port_and_no_podmonitor(tmp_path: Path) -> None:
    """train.metricsAddress null: the sidecar serves nothing, and nothing scrapes the pods."""
    data = example_data()
    data.pop("environments", None)
    data["spec"]["train"]["metricsAddress"] = None
    (tmp_path / "trainops.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    rendered = render(load_manifest(tmp_path / "trainops.yaml"))
    assert not [o for o in rendered.objects if o["kind"] == "PodMonitor"]
    job = next(o for o in rendered.objects if o["kind"] == "Job")
    watch = container(templates(job)["leader"], "ckpt-watch")
    assert "ports" not in watch and "--metrics-address" not in watch["command"]
