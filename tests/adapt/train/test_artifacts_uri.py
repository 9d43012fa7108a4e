"""Adapted-model artifacts on object storage: a moto S3 server on 127.0.0.1, tiny files (no training).

Covers publish (files first, manifest last), "already trained?" by the manifest at the URI,
lookup by key, materialising on another "node" (another cache folder) with hash checks, and a
half-published artifact (files without a manifest) not counting as trained.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from adaptlab.adapt.train.artifacts import (
    artifact_root_text,
    find_artifact,
    local_model_path,
    materialize_artifact,
    open_artifact,
)
from adaptlab.adapt.train.base_model import describe_base
from adaptlab.adapt.train.writer import ArtifactWriter
from adaptlab.errors import StoreError

pytest.importorskip("boto3")

BUCKET = "adaptlab-artifacts"  # the moto_s3 fixture's bucket (conftest)


@pytest.fixture
def node(moto_s3, monkeypatch, tmp_path):
    """The S3 environment, and a function that switches this process to another node's cache."""
    env, client, bucket = moto_s3
    assert bucket == BUCKET
    for k, v in env.items():
        monkeypatch.setenv(k, v)

    def use_cache(name: str) -> Path:
        monkeypatch.setenv("ADAPTLAB_CACHE", str(tmp_path / name))
        return tmp_path / name / "artifacts"

    use_cache("node-a")
    return client, use_cache


def _writer(root: str | Path, n: int) -> ArtifactWriter:
    return ArtifactWriter(root, label="tiny/model", variant="ft", scale=10, inputs={"n": n, "lr": 1e-4})


def _train(writer: ArtifactWriter) -> dict[str, bytes]:
    """Stand-in for training: a few files in the model folder (and a checkpoint, dropped at commit)."""
    files = {
        "config.json": b'{"hidden": 4}',
        "model.safetensors": os.urandom(3000),
        "1_Pooling/config.json": b'{"mode": "mean"}',
    }
    with writer.lock():
        writer.prepare()
        for rel, data in files.items():
            (writer.model_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (writer.model_dir / rel).write_bytes(data)
        writer.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        (writer.checkpoint_dir / "step-1").write_text("x")
    return files


def test_publish_find_and_materialise(node, tmp_path):
    client, use_cache = node
    root = f"s3://{BUCKET}/study/artifacts/"
    writer = _writer(root, 1)
    assert writer.existing() is None
    files = _train(writer)
    art = writer.commit(training={"loss": 0.5})
    assert not art.reused and art.uri == f"s3://{BUCKET}/study/artifacts/tiny_model/{writer.name}"
    assert art.location == art.uri and art.path.is_relative_to(tmp_path / "node-a")
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix="study/")["Contents"]}
    prefix = f"study/artifacts/tiny_model/{writer.name}/"
    assert keys == {prefix + "manifest.json"} | {prefix + "model/" + rel for rel in files}  # no checkpoints
    manifest = json.loads(client.get_object(Bucket=BUCKET, Key=prefix + "manifest.json")["Body"].read())
    assert manifest["key"] == writer.key and set(manifest["files"]) == {"model/" + r for r in files}

    again = _writer(root, 1).existing()  # "already trained?" sees the manifest at the URI
    assert again is not None and again.reused and again.key == writer.key

    other = use_cache("node-b")  # another node: finds it by key and materialises it in its own cache
    found = find_artifact(root, writer.key)
    assert found is not None and found.uri == art.uri and found.manifest["training"]["loss"] == 0.5
    assert not found.path.exists()
    assert found.model_path.is_relative_to(other)
    assert {rel: (found.model_path / rel).read_bytes() for rel in files} == files
    base = describe_base(found)  # PT -> FT / merge chaining starts from the materialised copy
    assert base.parent == {"key": writer.key, "variant": "ft", "path": art.uri}
    assert Path(local_model_path(art.uri + "/model")) == found.model_path
    assert find_artifact(root, "0" * 64) is None
    secret = os.environ["AWS_SECRET_ACCESS_KEY"]
    assert secret not in repr(found) and secret not in json.dumps(found.manifest, default=str)

    elsewhere = materialize_artifact(art.uri, tmp_path / "elsewhere")
    assert (elsewhere / "model" / "model.safetensors").read_bytes() == files["model.safetensors"]
    client.put_object(Bucket=BUCKET, Key=prefix + "model/model.safetensors", Body=b"tampered")
    with pytest.raises(StoreError, match="does not match the manifest"):
        materialize_artifact(art.uri, tmp_path / "tampered")
    assert not (tmp_path / "tampered").exists()


def test_half_published_is_not_trained(node, tmp_path):
    client, use_cache = node
    root = f"s3://{BUCKET}/half"
    writer = _writer(root, 2)
    prefix = f"half/tiny_model/{writer.name}/"
    client.put_object(Bucket=BUCKET, Key=prefix + "model/config.json", Body=b"{}")  # a publish cut short
    assert writer.existing() is None
    assert find_artifact(root, writer.key) is None
    with pytest.raises(StoreError, match="not a finished artifact"):
        open_artifact(f"{root}/tiny_model/{writer.name}")

    _train(writer)
    art = writer.commit()  # publishing again overwrites the leftovers and ends with the manifest
    assert client.get_object(Bucket=BUCKET, Key=prefix + "model/config.json")["Body"].read() == b'{"hidden": 4}'
    assert _writer(root, 2).existing().key == art.key

    # committed locally, but the node died before publishing: the next look publishes it
    writer3 = _writer(root, 3)
    _train(writer3)
    staged = writer3.partial_dir
    (staged / "manifest.json").write_text(
        json.dumps({"schema_version": 1, "key": writer3.key, "variant": "ft", "label": "tiny_model"})
    )
    shutil.rmtree(writer3.checkpoint_dir)
    os.rename(staged, writer3.final_dir)
    assert find_artifact(root, writer3.key) is None
    done = _writer(root, 3).existing()
    assert done is not None and find_artifact(root, writer3.key).uri == done.uri


def test_local_root_unchanged(tmp_path, monkeypatch):
    monkeypatch.setenv("ADAPTLAB_CACHE", str(tmp_path / "cache"))
    writer = _writer(tmp_path / "store" / "artifacts", 1)
    assert writer.uri is None and writer.final_dir == tmp_path / "store" / "artifacts" / "tiny_model" / writer.name
    _train(writer)
    art = writer.commit()
    assert art.uri is None and art.path == writer.final_dir and art.model_path == writer.final_dir / "model"
    assert "files" not in art.manifest and not (tmp_path / "cache").exists()
    assert find_artifact(tmp_path / "store" / "artifacts", writer.key).path == art.path
    assert artifact_root_text("s3://b/p/") == "s3://b/p" and artifact_root_text("rel") == os.path.abspath("rel")


def test_file_uri_goes_through_pyarrow(tmp_path, monkeypatch):
    """A non-S3 URI (here file://) is published, found and materialised through pyarrow.fs."""
    monkeypatch.setenv("ADAPTLAB_CACHE", str(tmp_path / "node-a"))
    root = f"file://{tmp_path}/remote/artifacts"
    writer = _writer(root, 4)
    files = _train(writer)
    art = writer.commit()
    published = tmp_path / "remote" / "artifacts" / "tiny_model" / writer.name
    assert art.uri == f"{root}/tiny_model/{writer.name}" and (published / "manifest.json").is_file()
    assert (published / "model" / "1_Pooling" / "config.json").read_bytes() == files["1_Pooling/config.json"]
    monkeypatch.setenv("ADAPTLAB_CACHE", str(tmp_path / "node-b"))
    found = find_artifact(root, writer.key)
    assert found is not None and found.uri == art.uri
    assert {rel: (found.model_path / rel).read_bytes() for rel in files} == files
    (published / "model" / "config.json").write_bytes(b"{}")
    with pytest.raises(StoreError, match="does not match the manifest"):
        materialize_artifact(art.uri, tmp_path / "tampered")
