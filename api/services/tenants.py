"""Tenants and API keys, kept in the state store (SQLite embedded, Redis distributed).

A key reads `cm_<key id>_<secret>`: the public key id finds its record in one lookup, and only
a salted PBKDF2 hash of the secret is stored beside the tenant, role, expiry and creation time.
The key itself is shown once, by `create_key`, and compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, replace

from core.access import Role
from core.errors import InvalidInput, TooLarge
from core.ports import StateStore

TENANT_PREFIX = "tenants:tenant:"
KEY_PREFIX = "tenants:key:"
RATE_PREFIX = "tenants:rate:"
# Set by the first key ever created and never removed: from then on the API requires keys
# (revoking every key does not open the API again).
AUTH_MARKER = "tenants:auth"
TENANT_NAME = re.compile(r"[a-z0-9][a-z0-9_\-]{0,31}")
KEY_FORMAT = re.compile(r"cm_([0-9a-f]{12})_([A-Za-z0-9_\-]{43})")
# The secret is 256 random bits, so the stretch only has to make a stolen hash useless, not
# resist guessing of a weak password; a higher count would cost every request.
HASH_ITERATIONS = 20_000


class TenantError(InvalidInput):
    """A bad tenant name, an unknown tenant or key id, or a duplicate tenant."""

    code = "invalid_tenant"


class QuotaExceededError(TooLarge):
    """Storing this would take the tenant over its storage quota."""

    code = "quota_exceeded"


@dataclass(frozen=True)
class Tenant:
    name: str
    created: float
    # The LLM budget in USD of the tenant's cognify jobs started without one (None: the
    # `job_budget_usd` setting).
    budget_usd: float | None = None


@dataclass(frozen=True)
class ApiKey:
    """A key's stored record (never the key itself)."""

    id: str
    tenant: str
    role: Role
    created: float
    expires: float | None
    revoked: bool
    salt: str
    hash: str

    def usable(self, now: float) -> bool:
        return not self.revoked and (self.expires is None or now < self.expires)


def check_tenant_name(name: str) -> str:
    """The tenant name, valid; TenantError says what is allowed."""
    if not TENANT_NAME.fullmatch(name):
        raise TenantError(
            f"invalid tenant name {name!r}: use 1-32 lowercase letters, digits, '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def _hash(secret: str, salt: bytes) -> str:
    return hashlib.pbkdf2_hmac("sha256", secret.encode(), salt, HASH_ITERATIONS).hex()


# Keys this process has verified: (stored hash, SHA-256 of the secret presented). PBKDF2 costs
# ~5 ms of CPU, on every request of a key otherwise. The record is still read each time, so a
# revoked or expired key is refused at once; wrong secrets are never remembered (guessing
# stays slow), and no secret is kept in memory.
_VERIFIED: OrderedDict[tuple[str, str], None] = OrderedDict()
_VERIFIED_MAX = 4096
_verified_lock = threading.Lock()


def _verified(secret: str, record: ApiKey) -> bool:
    """Whether `secret` is the secret of the key `record` holds the hash of."""
    seen = (record.hash, hashlib.sha256(secret.encode()).hexdigest())
    with _verified_lock:
        if seen in _VERIFIED:
            _VERIFIED.move_to_end(seen)
            return True
    if not hmac.compare_digest(_hash(secret, bytes.fromhex(record.salt)), record.hash):
        return False
    with _verified_lock:
        _VERIFIED[seen] = None
        while len(_VERIFIED) > _VERIFIED_MAX:
            _VERIFIED.popitem(last=False)
    return True


class Tenants:
    """Tenants and their keys in a state store."""

    def __init__(self, state: StateStore) -> None:
        self.state = state

    def create_tenant(self, name: str) -> Tenant:
        """A new tenant; TenantError when the name is bad or taken."""
        key = TENANT_PREFIX + check_tenant_name(name)
        if self.state.get(key) is not None:
            raise TenantError(f"tenant {name!r} already exists")
        tenant = Tenant(name, time.time())
        self.state.put(key, json.dumps(asdict(tenant)))
        return tenant

    def tenant(self, name: str) -> Tenant | None:
        raw = self.state.get(TENANT_PREFIX + name)
        return None if raw is None else Tenant(**json.loads(raw))

    def set_budget(self, name: str, budget_usd: float | None) -> Tenant:
        """Set (None: clear) the tenant's default job budget; TenantError when unknown or
        not positive."""
        tenant = self.tenant(check_tenant_name(name))
        if tenant is None:
            raise TenantError(f"tenant {name!r} does not exist; `cogmill tenants create` it")
        if budget_usd is not None and not budget_usd > 0:
            raise TenantError(f"a budget must be more than 0 USD, got {budget_usd}")
        tenant = replace(tenant, budget_usd=budget_usd)
        self.state.put(TENANT_PREFIX + name, json.dumps(asdict(tenant)))
        return tenant

    def tenants(self) -> list[Tenant]:
        keys = self.state.keys(TENANT_PREFIX)
        return [Tenant(**json.loads(raw)) for raw in self.state.get_many(keys) if raw]

    def exists(self, name: str) -> bool:
        return self.state.get(TENANT_PREFIX + name) is not None

    def create_key(
        self, tenant: str, role: Role = Role.READER, expires_days: float | None = None
    ) -> tuple[str, ApiKey]:
        """A new key for an existing tenant: the key (to show once) and its stored record."""
        if not self.exists(check_tenant_name(tenant)):
            raise TenantError(f"tenant {tenant!r} does not exist; `cogmill tenants create` it")
        key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        salt = secrets.token_bytes(16)
        now = time.time()
        expires = None if expires_days is None else now + expires_days * 86_400
        record = ApiKey(key_id, tenant, role, now, expires, False, salt.hex(), _hash(secret, salt))
        self._store(record)
        self.state.put(AUTH_MARKER, "1")
        return f"cm_{key_id}_{secret}", record

    def keys(self, tenant: str | None = None) -> list[ApiKey]:
        """Every key's record (revoked and expired ones too), optionally of one tenant."""
        raws = self.state.get_many(self.state.keys(KEY_PREFIX))
        records = [self._load(raw) for raw in raws if raw]
        return [r for r in records if tenant is None or r.tenant == tenant]

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key by its id; TenantError when no key has it."""
        raw = self.state.get(KEY_PREFIX + key_id)
        if raw is None:
            raise TenantError(f"no key with id {key_id!r}; `cogmill keys list` shows them")
        record = self._load(raw)
        revoked = ApiKey(**{**asdict(record), "revoked": True})
        self._store(revoked)
        return revoked

    def authenticate(self, key: str) -> ApiKey | None:
        """The usable key record `key` is the key of, or None (malformed, unknown, wrong,
        revoked or expired)."""
        found = KEY_FORMAT.fullmatch(key)
        if found is None:
            return None
        raw = self.state.get(KEY_PREFIX + found.group(1))
        if raw is None:
            return None
        record = self._load(raw)
        if not _verified(found.group(2), record):
            return None
        return record if record.usable(time.time()) else None

    def throttle(self, key_id: str, per_minute: int, now: float | None = None) -> float | None:
        """Count a request of the key in this minute: None while within `per_minute`, else
        the seconds until the next minute starts."""
        now = time.time() if now is None else now
        window = int(now // 60)
        counter = f"{RATE_PREFIX}{key_id}:{window}"
        count = self.state.incr(counter)
        if count == 1:  # the window's first request: let the counter expire with it
            # A request counted between the incr and this put is lost: at most a few, once.
            self.state.put(counter, "1", ttl=120)
        return None if count <= per_minute else (window + 1) * 60 - now

    def auth_configured(self) -> bool:
        """Whether any key was ever created (the API then requires one)."""
        return self.state.get(AUTH_MARKER) is not None

    def _store(self, record: ApiKey) -> None:
        self.state.put(
            KEY_PREFIX + record.id, json.dumps({**asdict(record), "role": record.role.value})
        )

    @staticmethod
    def _load(raw: str) -> ApiKey:
        data = json.loads(raw)
        return ApiKey(**{**data, "role": Role(data["role"])})
