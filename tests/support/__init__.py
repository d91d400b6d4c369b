"""Test helpers: the stack, clients, the app in process. Conftests only declare fixtures from these."""
