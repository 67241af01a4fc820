"""Profiles choose their image: the default profile (student, 64 MB) runs pandas from the
datascience image; the image is configurable and listed; a bad image is a clear config error."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from wasm_runner.settings import ConfigError, load_config

GROUPBY = ("import numpy as np, pandas as pd, matplotlib.pyplot as plt\n"
           "df = pd.DataFrame({'g': np.arange(100) % 5, 'v': np.arange(100.0)})\n"
           "print(df.groupby('g')['v'].mean().sum())")


def test_the_default_profiles_use_the_datascience_image() -> None:
    config = load_config(env={}, auth=False)
    assert config.profiles["student"].image == "datascience"
    assert config.profiles["analyst"].image == "datascience"


def test_a_profile_chooses_its_image_in_toml(tmp_path: Path) -> None:
    cfg = tmp_path / "server.toml"
    cfg.write_text('[profiles.tiny]\nimage = "plain"\nmemory_mb = 32\n[profiles.student]\ncpu_seconds = 1\n')
    config = load_config(path=cfg, env={}, auth=False)
    assert config.profiles["tiny"].image == "plain"
    assert config.profiles["student"].image == "datascience"  # kept from the built-in profile


def test_an_unknown_image_is_a_clear_error(tmp_path: Path) -> None:
    cfg = tmp_path / "server.toml"
    cfg.write_text('[profiles.x]\nimage = "gpu"\n')
    with pytest.raises(ConfigError, match="unknown image 'gpu'"):
        load_config(path=cfg, env={}, auth=False)


def test_the_student_profile_runs_pandas_within_its_64_mb(api: httpx.Client) -> None:
    r = api.post("/api/run", json={"code": GROUPBY, "profile": "student"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ok" and body["stdout"] == "247.5\n", body
    # the cap still holds for what the program adds on top of the image
    r = api.post("/api/run", json={"code": "import numpy as np\nx = np.ones(30_000_000)\nprint(x.sum())",
                                   "profile": "student", "limits": {"cpu_seconds": 2}})
    assert r.json()["status"] == "memory_limit"
    assert api.post("/api/run", json={"code": "print('ok')", "profile": "student"}).json()["stdout"] == "ok\n"


def test_profiles_list_their_image(api: httpx.Client) -> None:
    profiles = api.get("/api/profiles").json()["profiles"]
    assert profiles["student"]["image"] == "datascience"
