"""A subset of the KubeRay CRD schemas, kept here so the manifest tests run offline.

Source: the ``openAPIV3Schema`` of the ``ray.io/v1`` RayCluster and RayJob CRDs shipped with
KubeRay v1.5.1 (ray-operator/config/crd/bases), and Kubernetes core/v1 PodSpec /
networking.k8s.io/v1 NetworkPolicy (v1.32). Written by hand: only the fields our manifests use,
with their types; ``additionalProperties: false`` wherever the upstream object has a fixed set
of fields, so a misspelt or unknown field fails here as it would fail a server-side
``kubectl apply --validate=strict``. Extend it (from the same upstream version) when a
manifest needs another field.
"""

from __future__ import annotations

from typing import Any


def _obj(props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False}


STR = {"type": "string"}
INT = {"type": "integer"}
BOOL = {"type": "boolean"}
QUANTITY = {"type": ["string", "integer"]}
STRMAP = {"type": "object", "additionalProperties": {"type": "string"}}
RESOURCES = _obj(
    {
        "requests": {"type": "object", "additionalProperties": QUANTITY},
        "limits": {"type": "object", "additionalProperties": QUANTITY},
    }
)
SECCOMP = _obj({"type": {"enum": ["RuntimeDefault", "Localhost", "Unconfined"]}, "localhostProfile": STR}, ("type",))
CONTAINER_SC = _obj(
    {
        "allowPrivilegeEscalation": BOOL,
        "privileged": BOOL,
        "runAsNonRoot": BOOL,
        "runAsUser": INT,
        "runAsGroup": INT,
        "readOnlyRootFilesystem": BOOL,
        "seccompProfile": SECCOMP,
        "capabilities": _obj({"drop": {"type": "array", "items": STR}, "add": {"type": "array", "items": STR}}),
    }
)
POD_SC = _obj({"runAsNonRoot": BOOL, "runAsUser": INT, "runAsGroup": INT, "fsGroup": INT, "seccompProfile": SECCOMP})
CONTAINER = _obj(
    {
        "name": STR,
        "image": STR,
        "imagePullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
        "command": {"type": "array", "items": STR},
        "args": {"type": "array", "items": STR},
        "env": {
            "type": "array",
            "items": _obj({"name": STR, "value": STR, "valueFrom": {"type": "object"}}, ("name",)),
        },
        "envFrom": {
            "type": "array",
            "items": _obj(
                {
                    "secretRef": _obj({"name": STR, "optional": BOOL}, ("name",)),
                    "configMapRef": _obj({"name": STR, "optional": BOOL}, ("name",)),
                }
            ),
        },
        "resources": RESOURCES,
        "securityContext": CONTAINER_SC,
        "ports": {
            "type": "array",
            "items": _obj({"containerPort": INT, "name": STR, "protocol": STR}, ("containerPort",)),
        },
        "volumeMounts": {
            "type": "array",
            "items": _obj({"name": STR, "mountPath": STR, "readOnly": BOOL}, ("name", "mountPath")),
        },
    },
    ("name",),
)
VOLUME = _obj(
    {
        "name": STR,
        "emptyDir": _obj({"medium": STR, "sizeLimit": QUANTITY}),
        "secret": _obj({"secretName": STR, "defaultMode": INT}),
        "persistentVolumeClaim": _obj({"claimName": STR, "readOnly": BOOL}, ("claimName",)),
        "hostPath": _obj({"path": STR, "type": STR}, ("path",)),
    },
    ("name",),
)
POD_TEMPLATE = _obj(
    {
        "metadata": _obj({"labels": STRMAP, "annotations": STRMAP}),
        "spec": _obj(
            {
                "containers": {"type": "array", "minItems": 1, "items": CONTAINER},
                "volumes": {"type": "array", "items": VOLUME},
                "securityContext": POD_SC,
                "automountServiceAccountToken": BOOL,
                "serviceAccountName": STR,
                "restartPolicy": STR,
                "hostNetwork": BOOL,
                "hostPID": BOOL,
                "hostIPC": BOOL,
                "nodeSelector": STRMAP,
                "tolerations": {
                    "type": "array",
                    "items": _obj({"key": STR, "operator": STR, "value": STR, "effect": STR}),
                },
            },
            ("containers",),
        ),
    }
)
START_PARAMS = {"type": "object", "additionalProperties": {"type": "string"}}
HEAD = _obj(
    {
        "serviceType": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
        "rayStartParams": START_PARAMS,
        "template": POD_TEMPLATE,
        "enableIngress": BOOL,
    },
    ("template",),
)
WORKER = _obj(
    {
        "groupName": STR,
        "replicas": INT,
        "minReplicas": INT,
        "maxReplicas": INT,
        "numOfHosts": INT,
        "rayStartParams": START_PARAMS,
        "template": POD_TEMPLATE,
        "suspend": BOOL,
    },
    ("groupName", "template"),
)
AUTOSCALER = _obj(
    {
        "upscalingMode": {"enum": ["Default", "Aggressive", "Conservative"]},
        "idleTimeoutSeconds": INT,
        "resources": RESOURCES,
        "securityContext": CONTAINER_SC,
        "image": STR,
        "imagePullPolicy": STR,
        "env": {"type": "array"},
        "envFrom": {"type": "array"},
    }
)
CLUSTER_SPEC = _obj(
    {
        "rayVersion": STR,
        "enableInTreeAutoscaling": BOOL,
        "autoscalerOptions": AUTOSCALER,
        "authOptions": _obj({"mode": {"enum": ["disabled", "token"]}}),
        "headGroupSpec": HEAD,
        "workerGroupSpecs": {"type": "array", "items": WORKER},
        "suspend": BOOL,
    },
    ("headGroupSpec",),
)
METADATA = _obj({"name": STR, "namespace": STR, "labels": STRMAP, "annotations": STRMAP}, ("name",))

SCHEMAS: dict[str, dict[str, Any]] = {
    "RayCluster": _obj(
        {
            "apiVersion": {"const": "ray.io/v1"},
            "kind": {"const": "RayCluster"},
            "metadata": METADATA,
            "spec": CLUSTER_SPEC,
        },
        ("apiVersion", "kind", "metadata", "spec"),
    ),
    "RayJob": _obj(
        {
            "apiVersion": {"const": "ray.io/v1"},
            "kind": {"const": "RayJob"},
            "metadata": METADATA,
            "spec": _obj(
                {
                    "entrypoint": STR,
                    "shutdownAfterJobFinishes": BOOL,
                    "ttlSecondsAfterFinished": INT,
                    "activeDeadlineSeconds": INT,
                    "backoffLimit": INT,
                    "runtimeEnvYAML": STR,
                    "submitterPodTemplate": POD_TEMPLATE,
                    "submissionMode": {"enum": ["K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"]},
                    "rayClusterSpec": CLUSTER_SPEC,
                    "clusterSelector": STRMAP,
                }
            ),
        },
        ("apiVersion", "kind", "metadata", "spec"),
    ),
    "NetworkPolicy": _obj(
        {
            "apiVersion": {"const": "networking.k8s.io/v1"},
            "kind": {"const": "NetworkPolicy"},
            "metadata": METADATA,
            "spec": _obj(
                {
                    "podSelector": _obj({"matchLabels": STRMAP}),
                    "policyTypes": {"type": "array", "items": {"enum": ["Ingress", "Egress"]}},
                    "ingress": {"type": "array"},
                    "egress": {"type": "array"},
                },
                ("podSelector",),
            ),
        },
        ("apiVersion", "kind", "metadata", "spec"),
    ),
}
