"""Every TENK_* setting, as the README's table: `tenk settings`."""

from __future__ import annotations

import importlib
import pkgutil

from pydantic_settings import BaseSettings

import tenk


def settings_classes() -> list[type[BaseSettings]]:
    # Import every module under tenk.*.settings so that each domain's class is registered.
    for module in pkgutil.walk_packages(tenk.__path__, "tenk."):
        if module.name.endswith(".settings"):
            importlib.import_module(module.name)
    found: list[type[BaseSettings]] = []
    pending = list(BaseSettings.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        # Only the service's settings modules; the lab's baselines read TENK_* too but are not configured here.
        if cls.__module__.startswith("tenk.") and cls.__module__.endswith("settings"):
            found.append(cls)
    return sorted(found, key=lambda c: (c.model_config.get("env_prefix", ""), c.__name__))


def env_names() -> list[str]:
    return [
        f"{cls.model_config.get('env_prefix', '')}{name}".upper()
        for cls in settings_classes()
        for name in cls.model_fields
    ]


def markdown_table() -> str:
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for cls in settings_classes():
        prefix = str(cls.model_config.get("env_prefix", ""))
        for name, field in cls.model_fields.items():
            default = "" if field.is_required() else field.get_default(call_default_factory=True)
            if isinstance(default, list):
                default = ",".join(map(str, default))
            description = (field.description or "").replace("|", "\\|")
            lines.append(f"| `{(prefix + name).upper()}` | `{default}` | {description} |")
    return "\n".join(lines)
