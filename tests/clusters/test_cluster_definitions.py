"""Offline checks of clusters/: the VM launcher YAML through Ray's own config bootstrap, the
KubeRay manifests against a schema subset (kuberay_schema.py: hand-written from the ray.io/v1
RayCluster/RayJob CRDs of KubeRay v1.5.1 and core/v1 PodSpec, only the fields used here, with
unknown fields rejected) and the "restricted" pod security rules, and the shared install script."""

from __future__ import annotations

import copy
import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

_spec = importlib.util.spec_from_file_location("kuberay_schema", Path(__file__).with_name("kuberay_schema.py"))
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
SCHEMAS = _mod.SCHEMAS

jsonschema = pytest.importorskip("jsonschema")

REPO = Path(__file__).resolve().parents[2]
CLUSTERS = REPO / "clusters"
MANIFESTS = ["kuberay-raycluster.yaml", "kuberay-rayjob.yaml", "networkpolicy.yaml"]


def _load(name: str) -> dict:
    return yaml.safe_load((CLUSTERS / name).read_text())


def _cluster_spec(doc: dict) -> dict | None:
    if doc["kind"] == "RayCluster":
        return doc["spec"]
    if doc["kind"] == "RayJob":
        return doc["spec"]["rayClusterSpec"]
    return None


def _pods(doc: dict):
    spec = _cluster_spec(doc)
    if spec is None:
        return
    yield "head", spec["headGroupSpec"]["template"]["spec"]
    for g in spec.get("workerGroupSpecs", []):
        yield g["groupName"], g["template"]["spec"]
    if doc["kind"] == "RayJob" and doc["spec"].get("submitterPodTemplate"):
        yield "submitter", doc["spec"]["submitterPodTemplate"]["spec"]


def problems(doc: dict) -> list[str]:
    """Everything wrong with one manifest: schema, restricted pod security, resources, images."""
    out = (
        [
            f"schema: {e.json_path}: {e.message}"
            for e in jsonschema.Draft7Validator(SCHEMAS[doc.get("kind")]).iter_errors(doc)
        ]
        if doc.get("kind") in SCHEMAS
        else [f"unknown kind {doc.get('kind')!r}"]
    )
    if out:
        return out
    spec = _cluster_spec(doc)
    if spec is not None:
        if spec["headGroupSpec"].get("serviceType", "ClusterIP") != "ClusterIP":
            out.append("head service must be ClusterIP")
        if spec.get("authOptions", {}).get("mode") != "token":
            out.append("authOptions.mode must be token")
        for g in spec.get("workerGroupSpecs", []):
            if g.get("minReplicas") != g.get("maxReplicas") and not spec.get("enableInTreeAutoscaling"):
                out.append(f"{g['groupName']}: min/max replicas without enableInTreeAutoscaling")
            if "gpu" in g["groupName"]:
                for c in g["template"]["spec"]["containers"]:
                    if "nvidia.com/gpu" not in c.get("resources", {}).get("limits", {}):
                        out.append(f"{g['groupName']}: no nvidia.com/gpu limit")
    for name, pod in _pods(doc):
        psc = pod.get("securityContext", {})
        if pod.get("automountServiceAccountToken") is not False:
            out.append(f"{name}: automountServiceAccountToken must be false")
        if pod.get("hostNetwork") or pod.get("hostPID") or pod.get("hostIPC"):
            out.append(f"{name}: host namespaces")
        for v in pod.get("volumes", []):
            if "hostPath" in v:
                out.append(f"{name}: hostPath volume")
        for c in pod["containers"]:
            sc = c.get("securityContext", {})
            where = f"{name}/{c['name']}"
            if not (sc.get("runAsNonRoot") or psc.get("runAsNonRoot")):
                out.append(f"{where}: runAsNonRoot")
            if (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type") not in (
                "RuntimeDefault",
                "Localhost",
            ):
                out.append(f"{where}: seccompProfile RuntimeDefault")
            if sc.get("allowPrivilegeEscalation") is not False:
                out.append(f"{where}: allowPrivilegeEscalation must be false")
            if sc.get("privileged"):
                out.append(f"{where}: privileged")
            if "ALL" not in sc.get("capabilities", {}).get("drop", []) or sc.get("capabilities", {}).get("add"):
                out.append(f"{where}: capabilities must drop ALL and add none")
            if "requests" not in c.get("resources", {}):
                out.append(f"{where}: no resource requests")
            image = c["image"]
            if "/" not in image or ":" not in image.rsplit("/", 1)[1] or image.endswith(":latest"):
                out.append(f"{where}: image {image!r} needs a registry and a pinned tag")
        if name != "submitter":
            mounts = {m["mountPath"]: m["name"] for c in pod["containers"] for m in c.get("volumeMounts", [])}
            shm = [v for v in pod.get("volumes", []) if v["name"] == mounts.get("/dev/shm")]
            if not shm or shm[0].get("emptyDir", {}).get("medium") != "Memory":
                out.append(f"{name}: no in-memory /dev/shm")
    return out


@pytest.mark.parametrize("name", MANIFESTS)
def test_manifest_is_valid_and_restricted(name):
    assert problems(_load(name)) == []


BREAKAGES = {
    "unknown field": lambda d: d["spec"]["workerGroupSpecs"][0].__setitem__("replica", 2),
    "wrong type": lambda d: d["spec"]["workerGroupSpecs"][0].__setitem__("maxReplicas", "eight"),
    "latest image": lambda d: d["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0].__setitem__(
        "image", "adaptlab:latest"
    ),
    "no seccomp": lambda d: [
        d["spec"]["headGroupSpec"]["template"]["spec"]["securityContext"].pop("seccompProfile"),
        d["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["securityContext"].pop("seccompProfile"),
    ],
    "privileged": lambda d: d["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0][
        "securityContext"
    ].__setitem__("privileged", True),
    "LoadBalancer": lambda d: d["spec"]["headGroupSpec"].__setitem__("serviceType", "LoadBalancer"),
    "no autoscaling": lambda d: d["spec"].__setitem__("enableInTreeAutoscaling", False),
    "token mounted": lambda d: d["spec"]["headGroupSpec"]["template"]["spec"].pop("automountServiceAccountToken"),
}


@pytest.mark.parametrize("what", sorted(BREAKAGES))
def test_a_broken_manifest_fails(what):
    doc = copy.deepcopy(_load("kuberay-raycluster.yaml"))
    BREAKAGES[what](doc)
    assert problems(doc), f"{what} was not detected"


def test_networkpolicy_selects_the_ray_pods():
    labels = {_load("networkpolicy.yaml")["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"]}
    for name in ("kuberay-raycluster.yaml", "kuberay-rayjob.yaml"):
        spec = _cluster_spec(_load(name))
        for g in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
            assert g["template"]["metadata"]["labels"]["app.kubernetes.io/name"] in labels


def test_versions_agree():
    script = (CLUSTERS / "install.sh").read_text()
    ray = re.search(r'RAY_VERSION="([0-9.]+)"', script).group(1)
    torch = re.search(r'TORCH_VERSION="([0-9.]+)"', script).group(1)
    assert torch == "2.13.0"
    assert _load("kuberay-raycluster.yaml")["spec"]["rayVersion"] == ray
    assert _load("kuberay-rayjob.yaml")["spec"]["rayClusterSpec"]["rayVersion"] == ray
    docker = (REPO / "Dockerfile").read_text()
    assert "clusters/install.sh" in docker and "USER 1000" in docker and "ARG VARIANT" in docker
    assert not re.search(r"(?i)(secret|token|password)\s*=", docker)


def test_install_script_dry_run(tmp_path):
    for variant, index in (("cpu", "whl/cpu"), ("gpu", "whl/cu128")):
        res = subprocess.run(
            ["bash", str(CLUSTERS / "install.sh"), str(REPO), variant],
            capture_output=True,
            text=True,
            timeout=30,
            env={"PATH": "/usr/bin:/bin", "ADAPTLAB_INSTALL_DRY_RUN": "1", "ADAPTLAB_VENV": str(tmp_path / "v")},
        )
        assert res.returncode == 0, res.stderr
        assert index in res.stdout and "torch==2.13.0" in res.stdout and "==2.60.0" in res.stdout
    bad = subprocess.run(
        ["bash", str(CLUSTERS / "install.sh"), str(REPO), "tpu"],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "ADAPTLAB_INSTALL_DRY_RUN": "1"},
    )
    assert bad.returncode == 2


def test_vm_cluster_passes_rays_config_bootstrap():
    from jsonschema import ValidationError  # Ray validates cluster files with jsonschema
    from ray.autoscaler._private.commands import _bootstrap_config

    raw = _load("vm-cluster.yaml")
    cfg = _bootstrap_config(copy.deepcopy(raw), no_config_cache=True)  # defaults + Ray's JSON schema
    assert cfg["provider"]["type"] == "local"
    head = " ".join(cfg["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head and "RAY_AUTH_MODE=token" in head
    assert """--system-config='{"enable_metrics_collection":false}'""" in head  # no token-free metrics port
    assert "RAY_AUTH_MODE=token" in " ".join(cfg["worker_start_ray_commands"])
    assert "install.sh" in " ".join(raw["setup_commands"]) and "pip install" not in " ".join(raw["setup_commands"])
    broken = copy.deepcopy(raw)
    broken["min_wokers"] = 2  # a misspelt top-level key
    with pytest.raises(ValidationError, match="min_wokers"):
        _bootstrap_config(broken, no_config_cache=True)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_kustomization_sets_the_images():
    res = subprocess.run(["kubectl", "kustomize", str(CLUSTERS)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    images = set(re.findall(r"image: (\S+)", res.stdout))
    assert images == {"registry.example.com/adaptlab:0.1.0", "registry.example.com/adaptlab-gpu:0.1.0"}
