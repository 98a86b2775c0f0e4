"""transformers' chat-template environment, rebuilt on Python's jinja2 (the reference the gateway is held to).

As transformers' render_jinja_template / _compile_jinja_template build it: an ImmutableSandboxedEnvironment
with trim_blocks, lstrip_blocks and the loopcontrols extension; `tojson` as json.dumps with ensure_ascii=False
by default and the caller's indent, separators and sort_keys; raise_exception raising a TemplateError; and
strftime_now(format) as datetime.now().strftime(format). The clock is fixed here (NOW) so goldens do not
depend on the day they were written; the TypeScript tests pass the same instant.
"""
import json
from datetime import datetime

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

# 2025-03-04 05:06:07 local time: every strftime field has a distinct value.
NOW = datetime(2025, 3, 4, 5, 6, 7)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise TemplateError(message)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters['tojson'] = tojson
    env.globals['raise_exception'] = raise_exception
    env.globals['strftime_now'] = lambda fmt: NOW.strftime(fmt)
    return env


def render(env, source, context):
    """('text', rendered) or ('error', kind, message): kind 'raise' for raise_exception, else 'python'."""
    try:
        return {'text': env.from_string(source).render(**context)}
    except TemplateError as err:
        if type(err) is TemplateError:
            return {'error': 'raise', 'message': str(err)}
        return {'error': 'python', 'message': f'{type(err).__name__}: {err}'}
    except Exception as err:  # TypeError, ValueError, ...: Python fails too, so vLLM answers 400
        return {'error': 'python', 'message': f'{type(err).__name__}: {err}'}
