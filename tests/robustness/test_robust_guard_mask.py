"""One masking rule for every printed address (issue 28): a password is hidden whatever character
RFC 3986 allows in userinfo it holds, and also with ``/``, ``?``, ``#`` and ``@`` typed raw, as in
AWS secret keys; checked over random passwords (hypothesis) and on the CLI's own lines."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptlab.errors import is_uri, mask_url
from adaptlab.study import submit as submit_mod
from robustness.hostile import assert_one_line_error, cli

UNRESERVED = string.ascii_letters + string.digits + "-._~"
SUB_DELIMS = "!$&'()*+,;="
USERINFO_CHARS = UNRESERVED + SUB_DELIMS + ":"  # RFC 3986 section 3.2.1 (pct-encoded: '%' + hex)
TYPED_RAW = "/?#@"  # not allowed there, but typed by users (an AWS secret key holds '/')

users = st.text(UNRESERVED + SUB_DELIMS, min_size=1, max_size=12)
passwords = st.text(USERINFO_CHARS + TYPED_RAW + "%", min_size=1, max_size=40)
hosts = st.sampled_from(["bkt", "127.0.0.1:9", "head.example.org:8265", "[::1]:8265", "my-bucket"])
paths = st.sampled_from(["", "/", "/x", "/prefix/store", "/api/jobs/?limit=2", "#frag"])
schemes = st.sampled_from(["s3://", "http://", "https://", "gs://", "ftp://", "az://"])


@settings(max_examples=400, deadline=None)
@given(
    scheme=schemes,
    user=users,
    password=passwords,
    host=hosts,
    path=paths,
    before=st.sampled_from(["", "cannot reach ", "--store '", "(at "]),
    after=st.sampled_from(["", " (refused)", "': bad", ") failed", "\nnext line"]),
)
def test_any_password_is_masked_in_any_message(scheme, user, password, host, path, before, after):
    text = f"{before}{scheme}{user}:{password}@{host}{path}{after}"
    assert mask_url(text) == f"{before}{scheme}{user}:***@{host}{path}{after}"


@settings(max_examples=200, deadline=None)
@given(token=st.text(UNRESERVED + SUB_DELIMS.replace("'", "") + "%", min_size=1, max_size=40), host=hosts, path=paths)
def test_a_token_alone_is_masked(token, host, path):
    assert mask_url(f"https://{token}@{host}{path}") == f"https://***@{host}{path}"


@pytest.mark.parametrize(
    "text",
    [
        "s3://bucket/prefix",
        "http://127.0.0.1:8265/api/jobs/",
        "mail a@b.org or c:d",
        "/home/me/results@2024",
        "s3://bucket/key@v2 (x)",
        "file:///data/x",
    ],
)
def test_text_without_credentials_is_unchanged(text):
    assert mask_url(text) == text


def test_one_uri_rule():
    assert is_uri("s3://b/x") and is_uri("file:///x") and is_uri("abfss://c@a.dfs.core.windows.net/x")
    assert not is_uri("results/s3") and not is_uri("C:\\x") and not is_uri(None) and not is_uri("s3:/b")


def test_results_store_with_a_slash_in_the_password_is_one_masked_line(work):
    rc, out, err = cli(["results", "--store", "s3://AKIAX:wJalrXUtn/FEMI+K7MDENG@bkt/x"])
    assert_one_line_error(rc, err, ("without credentials",))
    assert "FEMI" not in out + err and "wJalrXUtn" not in out + err


def test_submit_address_with_a_hash_in_the_password_is_masked(work, monkeypatch):
    def failing(address):
        raise RuntimeError(f"Failed to connect to {address}/api/version")

    monkeypatch.setattr(
        submit_mod, "_client", lambda address: submit_mod._call(address, "connecting", failing, address)
    )
    rc, out, err = cli(["submit", "study.toml", "--address", "http://admin:hun#ter2@127.0.0.1:9", "--store", "out"])
    assert_one_line_error(rc, err, ("admin:***@127.0.0.1:9",))
    assert "ter2" not in out + err
