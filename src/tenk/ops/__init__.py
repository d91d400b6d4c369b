"""Operations: request ids, structured logs, metrics, auth, body limits, health."""
