"""Kept for the listeners' registrations (handlers/actions/__init__.py, handlers/views/__init__.py) until they
import handlers.errors.guarded, the one error boundary, which this names twice."""

from handlers.errors import CLICK, FORM, NO_DECISION, guarded

audited = reported = guarded

__all__ = ["CLICK", "FORM", "NO_DECISION", "audited", "guarded", "reported"]
