"""`cogmill tenants` and `cogmill keys` through the real CLI, on the embedded state store."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from api.cli import app
from api.services.tenants import Tenants
from core.access import Role
from core.settings import Settings
from core.stores.factory import state_store


def test_tenants_and_keys_lifecycle(tmp_path: Path) -> None:
    runner = CliRunner()

    def cli(*args: str) -> tuple[int, str]:
        result = runner.invoke(app, list(args), env={"COGMILL_HOME": str(tmp_path)})
        return result.exit_code, result.output

    assert cli("tenants", "create", "acme") == (0, "tenant acme created\n")
    code, output = cli("tenants", "create", "acme")
    assert code == 2 and "already exists" in output
    code, output = cli("tenants", "create", "Bad:Name")
    assert code == 2 and "invalid tenant name" in output
    code, output = cli("keys", "create", "--tenant", "nobody")
    assert code == 2 and "does not exist" in output
    code, output = cli("keys", "create", "--tenant", "acme", "--role", "writer", "--expires", "30")
    assert code == 0, output
    key = output.splitlines()[0]
    key_id = re.fullmatch(r"cm_([0-9a-f]{12})_.+", key).group(1)  # type: ignore[union-attr]
    code, output = cli("tenants", "list")
    assert code == 0 and output.startswith("acme\t")
    code, output = cli("keys", "list")
    assert code == 0 and re.match(rf"{key_id}\tacme\twriter\tactive\texpires 20", output), output
    assert key not in output  # the key is shown once, at creation
    state = state_store(Settings(home=tmp_path))
    try:
        found = Tenants(state).authenticate(key)
        assert found is not None and (found.tenant, found.role) == ("acme", Role.WRITER)
        assert cli("keys", "revoke", key_id) == (0, f"key {key_id} revoked\n")
        assert Tenants(state).authenticate(key) is None
    finally:
        state.close()
    code, output = cli("keys", "list", "--tenant", "acme")
    assert "\trevoked\t" in output
    code, output = cli("keys", "revoke", "000000000000")
    assert code == 2 and "no key with id" in output
