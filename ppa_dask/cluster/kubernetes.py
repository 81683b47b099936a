"""Kubernetes clusters: a dask-kubernetes ``DaskCluster`` manifest, checked and opened.

A cluster file may be a ``DaskCluster`` resource of the Dask operator (``kind: DaskCluster``,
also what ``kubectl apply -f`` takes). :func:`validate_daskcluster` checks it without a
Kubernetes cluster, against the operator's published OpenAPI schema when dask-kubernetes is
installed (:func:`daskcluster_schema`); :func:`kubernetes_client` starts it and yields a Client.

Examples
--------
>>> try:
...     validate_daskcluster({"apiVersion": "v1", "kind": "DaskCluster"}, schema={})
... except ClusterConfigError as exc:
...     print(str(exc).split("; ")[0])
DaskCluster: apiVersion: expected 'kubernetes.dask.org/v1', got 'v1'
"""

from __future__ import annotations

import contextlib
import functools
import os

from ppa_dask.cluster.errors import ClusterConfigError
from ppa_dask.utils.signals import keep_signal_handlers

__all__ = ["daskcluster_schema", "validate_daskcluster", "kubernetes_client"]

#: Where dask-kubernetes ships the DaskCluster custom resource definition (fully expanded).
_DASKCLUSTER_CRD = (
    "operator",
    "deployment",
    "helm",
    "dask-kubernetes-operator",
    "crds",
    "daskcluster.yaml",
)


@functools.lru_cache(maxsize=1)
def daskcluster_schema():
    """The OpenAPI v3 schema of ``DaskCluster`` from the installed dask-kubernetes, or None.

    Read from the operator's published custom resource definition without importing
    dask-kubernetes (which would start its Kubernetes machinery).
    """
    import importlib.util

    import yaml

    spec = importlib.util.find_spec("dask_kubernetes")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        crd_path = os.path.join(root, *_DASKCLUSTER_CRD)
        if os.path.isfile(crd_path):
            with open(crd_path) as f:
                # a large file: the C loader when PyYAML has it
                crd = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            for version in crd["spec"]["versions"]:
                if version["name"] == "v1":
                    return version["schema"]["openAPIV3Schema"]
    return None


_OPENAPI_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": (int, float),
}


def _schema_errors(value, schema, where, errors):
    """Check ``value`` against a Kubernetes structural schema (types, required, enum, unknown
    fields: Kubernetes prunes fields its schema does not know, so they are errors here)."""
    if value is None:  # the API server drops null fields (not nullable) before validating
        return
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            errors.append(f"{where}: expected an integer or a string, got {value!r}")
        return
    kind = schema.get("type")
    if kind is not None:
        expected = _OPENAPI_TYPES[kind]
        bad = not isinstance(value, expected) or (
            isinstance(value, bool) and kind in ("integer", "number")
        )
        if bad:
            errors.append(f"{where}: expected {kind}, got {type(value).__name__} {value!r}")
            return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: expected one of {schema['enum']}, got {value!r}")
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                errors.append(f"{where}.{key}: required")
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if props is not None and key in props:
                _schema_errors(item, props[key], f"{where}.{key}", errors)
            elif isinstance(extra, dict):
                _schema_errors(item, extra, f"{where}.{key}", errors)
            elif props is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
                errors.append(
                    f"{where}.{key}: unknown field (expected one of {', '.join(sorted(props))})"
                )
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _schema_errors(item, schema["items"], f"{where}[{i}]", errors)


def validate_daskcluster(spec, schema=None, where="DaskCluster"):
    """Check a ``DaskCluster`` manifest without a Kubernetes cluster.

    Checks the resource header, that scheduler and worker pods name a container running
    ``dask scheduler`` / ``dask worker``, that the scheduler's service reaches its ports, and,
    when dask-kubernetes is installed (or ``schema`` is given), every field against the
    operator's published OpenAPI schema.

    Raises
    ------
    ClusterConfigError
        Listing the first few problems with their paths (e.g. ``spec.worker.replicas``).
    """
    errors = []
    if spec.get("apiVersion") != "kubernetes.dask.org/v1":
        errors.append(
            f"apiVersion: expected 'kubernetes.dask.org/v1', got {spec.get('apiVersion')!r}"
        )
    if spec.get("kind") != "DaskCluster":
        errors.append(f"kind: expected 'DaskCluster', got {spec.get('kind')!r}")
    schema = daskcluster_schema() if schema is None else schema
    if schema is not None:
        # every resource has these; a CRD's schema describes only the rest
        implicit = {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        }
        schema = dict(schema, properties={**implicit, **schema.get("properties", {})})
        _schema_errors(spec, schema, "", errors)
        errors = [e.lstrip(".") for e in errors]
    body = spec.get("spec") if isinstance(spec.get("spec"), dict) else {}
    for role, command in (("scheduler", "scheduler"), ("worker", "worker")):
        part = body.get(role)
        if not isinstance(part, dict):
            errors.append(f"spec.{role}: required")
            continue
        containers = ((part.get("spec") or {}).get("containers")) or []
        words = [
            " ".join(map(str, (c.get("command") or []) + (c.get("args") or [])))
            for c in containers
            if isinstance(c, dict)
        ]
        if not any(f"dask {command}" in w or f"dask-{command}" in w for w in words):
            errors.append(f"spec.{role}.spec.containers: no container runs 'dask {command}'")
        if role == "scheduler":
            ports = {
                p.get("name")
                for c in containers
                if isinstance(c, dict)
                for p in c.get("ports") or []
            }
            for port in ((part.get("service") or {}).get("ports")) or []:
                target = port.get("targetPort")
                if isinstance(target, str) and target not in ports:
                    errors.append(
                        f"spec.scheduler.service.ports: targetPort {target!r} is not "
                        f"a named port of the scheduler container ({sorted(ports)})"
                    )
    if errors:
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise ClusterConfigError(f"{where}: " + "; ".join(errors[:3]) + more)


@contextlib.contextmanager
def kubernetes_client(config):
    """Start the ``DaskCluster`` of ``config`` (:func:`ppa_dask.cluster.read_cluster_config` of
    a manifest) with dask-kubernetes' operator, and yield a Client of it; both closed on exit.

    Raises
    ------
    ClusterConfigError
        When dask-kubernetes is not installed.
    """
    from distributed import Client

    try:
        with keep_signal_handlers():
            from dask_kubernetes.operator import KubeCluster
    except ImportError:
        raise ClusterConfigError(
            f"{config['path']}: a DaskCluster needs dask-kubernetes (pip install "
            "'ppa-dask[cluster]') and the Dask operator in the Kubernetes cluster"
        ) from None
    spec = config["spec"]
    namespace = (spec.get("metadata") or {}).get("namespace")
    with KubeCluster(custom_cluster_spec=spec, namespace=namespace, **config["options"]) as kube:
        with Client(kube, set_as_default=True) as client:
            yield client
