"""KEP-5339 access-provider documents: parsing, selection, per-profile arguments and variables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcr_provider_inventory import (
    ADDITIONAL_ARGS_EXTENSION,
    ADDITIONAL_ENVS_EXTENSION,
    AccessConfigError,
    AccessProviders,
    NoAccessProviderError,
)


def document(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"providers": list(entries)}


def entry(name: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "execConfig": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "/bin/plugin",
            "args": ["--base"],
            "env": [{"name": "A", "value": "configured"}, {"name": "B", "value": "configured"}],
        },
    }
    out.update(extra)
    return out


def profile(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns"}, "status": status}


def offered(name: str, server: str = "https://one", *extensions: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "cluster": {
            "server": server,
            "certificate-authority-data": "Q0E=",
            "certificate-authority": "/etc/hub-only/ca.crt",
            "extensions": list(extensions),
        },
    }


def test_the_first_configured_provider_the_profile_offers_is_used() -> None:
    providers = AccessProviders.from_dict(document(entry("gcp"), entry("token")))
    chosen, cluster = providers.select(
        profile(accessProviders=[offered("token"), offered("gcp", "https://g")])
    )
    assert chosen.name == "gcp"
    assert cluster["server"] == "https://g"
    # accessProviders wins over the deprecated credentialProviders for the same name
    chosen, cluster = providers.select(
        profile(
            credentialProviders=[offered("token", "https://old")],
            accessProviders=[offered("token", "https://new")],
        )
    )
    assert (chosen.name, cluster["server"]) == ("token", "https://new")
    # the deprecated field alone still works
    chosen, cluster = providers.select(profile(credentialProviders=[offered("token", "https://old")]))
    assert cluster["server"] == "https://old"
    with pytest.raises(
        NoAccessProviderError, match=r"profile offers 'azure'; configured in <dict>: 'gcp', 'token'"
    ):
        providers.select(profile(accessProviders=[offered("azure")]))
    with pytest.raises(NoAccessProviderError, match="profile offers none"):
        providers.select(profile())


def test_kubeconfig_uses_the_exec_plugin_never_interactively_and_drops_hub_file_paths() -> None:
    providers = AccessProviders.from_dict(document(entry("token")))
    kc = providers.kubeconfig_for(profile(accessProviders=[offered("token")]))
    cluster = kc["clusters"][0]["cluster"]
    assert cluster["server"] == "https://one"
    assert cluster["certificate-authority-data"] == "Q0E="
    assert "certificate-authority" not in cluster
    user = kc["users"][0]["user"]["exec"]
    assert user["command"] == "/bin/plugin"
    assert user["interactiveMode"] == "Never"
    # extensions are ignored under the default Ignore policies
    args_ext = {"name": ADDITIONAL_ARGS_EXTENSION, "extension": ["--cluster", "p"]}
    env_ext = {"name": ADDITIONAL_ENVS_EXTENSION, "extension": {"B": "profile", "C": "profile"}}
    kc = providers.kubeconfig_for(
        profile(accessProviders=[offered("token", "https://one", args_ext, env_ext)])
    )
    assert kc["users"][0]["user"]["exec"]["args"] == ["--base"]
    assert kc["users"][0]["user"]["exec"]["env"] == [
        {"name": "A", "value": "configured"},
        {"name": "B", "value": "configured"},
    ]


@pytest.mark.parametrize(
    ("policy", "expected_b"),
    [("AppendIfNotExists", "configured"), ("Replace", "profile")],
)
def test_profile_sourced_arguments_and_variables_follow_the_policies(policy: str, expected_b: str) -> None:
    providers = AccessProviders.from_dict(
        document(entry("token", profileSourcedCLIArgsPolicy="Append", profileSourcedEnvVarsPolicy=policy))
    )
    args_ext = {"name": ADDITIONAL_ARGS_EXTENSION, "extension": ["--cluster", "p"]}
    env_ext = {"name": ADDITIONAL_ENVS_EXTENSION, "extension": {"B": "profile", "C": "profile"}}
    p = profile(accessProviders=[offered("token", "https://one", args_ext, env_ext)])
    first = providers.kubeconfig_for(p)
    second = providers.kubeconfig_for(p)
    # Per-profile input never accumulates in the configured plugin settings.
    assert first == second
    assert providers.providers[0].exec_config["args"] == ["--base"]
    exec_config = first["users"][0]["user"]["exec"]
    assert exec_config["args"] == ["--base", "--cluster", "p"]
    assert exec_config["env"] == [
        {"name": "A", "value": "configured"},
        {"name": "B", "value": expected_b},
        {"name": "C", "value": "profile"},
    ]
    bad = profile(
        accessProviders=[
            offered("token", "https://one", {"name": ADDITIONAL_ARGS_EXTENSION, "extension": "x"})
        ]
    )
    with pytest.raises(ValueError, match="additional-args must be a list of strings"):
        providers.kubeconfig_for(bad)
    no_server = {"name": "token", "cluster": {"certificate-authority-data": "Q0E="}}
    with pytest.raises(
        ValueError, match="access provider 'token': the profile's cluster entry has no server"
    ):
        providers.kubeconfig_for(profile(accessProviders=[no_server]))


def test_malformed_documents_name_the_file_and_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "providers.json"
    with pytest.raises(AccessConfigError, match=rf"access providers {path}: cannot read"):
        AccessProviders.from_file(path)
    path.write_text("{not json")
    with pytest.raises(AccessConfigError, match=rf"access providers {path}: malformed JSON"):
        AccessProviders.from_file(path)
    path.write_text('{"providers": []}')
    with pytest.raises(AccessConfigError, match="no providers configured"):
        AccessProviders.from_file(path)
    cases = [
        ({"providers": {}}, "'providers' must be a list"),
        (document({"execConfig": {}}), r"providers\[0\]: 'name' must be a non-empty string"),
        (document({"name": "x"}), "provider 'x': 'execConfig' must be an object"),
        (document({"name": "x", "execConfig": {"command": "c"}}), r"execConfig.apiVersion must be"),
        (
            document(entry("x", profileSourcedCLIArgsPolicy="Prepend")),
            "'Prepend' is not one of Append, Ignore",
        ),
        (
            document(entry("x", profileSourcedEnvVarsPolicy="Merge")),
            "'Merge' is not one of AppendIfNotExists",
        ),
        (document(entry("x"), entry("x")), "provider 'x' is listed twice"),
    ]
    for data, message in cases:
        with pytest.raises(AccessConfigError, match=message):
            AccessProviders.from_dict(data, source="cfg.json")
    unknown = entry("x")
    unknown["execConfig"]["comand"] = "typo"
    with pytest.raises(AccessConfigError, match="unknown execConfig field"):
        AccessProviders.from_dict(document(unknown))
    path.write_text('{"providers": [{"name": "ok", "execConfig": {"apiVersion": "v", "command": "c"}}]}')
    assert [p.name for p in AccessProviders.from_file(path).providers] == ["ok"]
