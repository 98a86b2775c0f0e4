"""Renders small templates with Python's jinja2 in transformers' environment and writes what each gives to
test/fixtures/goldens/jinja-compat.json: the reference test/unit/tokenize/jinja-compat.test.ts holds the
gateway's Jinja renderer (src/tokenize/jinja-compat.ts) to, feature by feature.

Run from the repository root: python3 scripts/goldens/render-jinja-compat.py  (Python 3 with jinja2; Debian:
apt-get install -y python3-jinja2, then /usr/bin/python3).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_env import environment, render  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
OUT = os.path.join(ROOT, 'test', 'fixtures', 'goldens', 'jinja-compat.json')

CASES = [
    # name, template, context
    ('lstrip with an argument (Qwen3 reasoning)', "{{ c.split('</think>')[-1].lstrip('\\n') }}|{{ c.strip('\\n') }}|", {'c': '<think>\nr\n</think>\n\n    indented()\n  '}),
    ('strip, lstrip, rstrip with chars and without', "[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ 'xxhixx'.strip('x') }}][{{ 'abcba'.rstrip('ab') }}]", {'s': '\u3000\t hi \u0085\n'}),
    ('trim filter with chars', "[{{ s|trim }}][{{ '--a--'|trim('-') }}]", {'s': '\ufeff x \u001c'}),
    ('format filter', "{{ '%s is %d years, %.2f%%'|format('Ann', 30, 12.345) }}|{{ '%5s|%-5s|%05d'|format('a', 'b', 42) }}", {}),
    ('min, max, sum', "{{ [3, 1, 2]|min }} {{ ['b', 'A', 'c']|max }} {{ [1, 2, 3]|sum }} {{ xs|sum(attribute='n') }} {{ xs|max(attribute='n') }}", {'xs': [{'n': 2}, {'n': 5}]}),
    ('select, reject, selectattr, rejectattr with tests', "{{ [1, 2, 3, 4]|reject('odd')|list }} {{ [1, 2, 3]|select('odd')|list }} {{ ms|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ ms|rejectattr('role', 'eq', 'user')|list|length }}", {'ms': [{'role': 'user', 'content': 'a'}, {'role': 'tool', 'content': 'b'}]}),
    ('groupby', "{% for role, items in ms|groupby('role') %}{{ role }}={{ items|length }};{% endfor %}{% for g in ms|groupby('role') %}{{ g.grouper }}:{{ g.list|map(attribute='content')|join(',') }};{% endfor %}", {'ms': [{'role': 'user', 'content': 'a'}, {'role': 'assistant', 'content': 'b'}, {'role': 'user', 'content': 'c'}]}),
    ('batch and truncate', "{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 0)|list }} [{{ 'hello world foo bar'|truncate(9) }}] [{{ 'hello world'|truncate(5, true) }}] [{{ 'short'|truncate(3) }}]", {}),
    ('string repetition and printf %', "{{ '-' * 3 }}{{ 2 * 'ab' }}{{ [0] * 2 }} {{ '%s/%s' % ('a', 1) }} {{ '%d%%' % 5 }} {{ -7 % 3 }} {{ 7 % -3 }}", {}),
    ('splitlines, count, find, join, format', "{{ 'a\\nb\\r\\nc\\n'.splitlines() }} {{ 'banana'.count('an') }} {{ 'banana'.find('n') }} {{ '-'.join(['a', 'b']) }} {{ '{} and {name}'.format('x', name='y') }} {{ '{0!r}{0}'.format('z') }}", {}),
    ('split and rsplit', "{{ ' a  b c '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ ' a b  c '.split(none, 1) }}", {}),
    ('title, capitalize, upper, is-methods', "{{ \"they're bill's\".title() }} {{ 'hELLO wORLD'.capitalize() }} {{ 'hELLO'|capitalize }} {{ '123'.isdigit() }} {{ ' '.isspace() }}", {}),
    ('tojson options', "{{ x|tojson }}|{{ x|tojson(indent=2) }}|{{ x|tojson(separators=(',', ':')) }}|{{ x|tojson(sort_keys=true) }}|{{ x|tojson(ensure_ascii=true) }}|{{ [1, [2, {}]]|tojson(indent=0) }}", {'x': {'b': 'é😀', 'a': [1, 2.5, None, True], 'c': {}}}),
    ('python output of values', "{{ none }}|{{ true }}|{{ false }}|{{ [1, 'a', none, 2.0] }}|{{ {'k': 'v', 'n': none} }}|{{ 1.0 }}|{{ 0.1 }}|{{ tiny }}|{{ 'a' ~ none ~ 1 ~ true }}", {'tiny': 1e-07}),
    ('equality and membership as Python', "{{ 1 == 1.0 }} {{ [1] == [1] }} {{ '1' == 1 }} {{ {'a': 1} in [{'a': 1}] }} {{ 'b' < 'a' }} {{ 'x' in 'xyz' }} {{ 'k' in {'k': 1} }}", {}),
    ('loop controls and loop variables', "{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ loop.index }}:{{ x }}{{ ',' if not loop.last }}{% endfor %}|{% for x in [1] %}{% break %}{% else %}E{% endfor %}", {'xs': [1, 2, 3, 4, 5]}),
    ('strftime_now', "{{ strftime_now('%Y-%m-%d %H:%M:%S') }}|{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%A %B %-d %j %I%p %y') }}", {}),
    ('namespace, range, dict', "{% set ns = namespace(n=0) %}{% for i in range(1, 7, 2) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }} {{ range(3)|list }} {{ dict(a=1)['a'] }}", {}),
    ('special tokens map', "{{ bos_token }}{{ eos_token }}{{ additional_special_tokens|length }}{{ boi_token }}", {'bos_token': '<bos>', 'eos_token': '<eos>', 'additional_special_tokens': ['<a>', '<b>'], 'boi_token': '<start_of_image>'}),
    ('raise_exception is the template\'s verdict', "{% if ms|length > 1 %}{{ raise_exception('at most one message') }}{% endif %}ok", {'ms': [1, 2]}),
    ('adding a dict to a string fails in Python too', "{{ 'args: ' + args }}", {'args': {'a': 1}}),
    ('attribute of an undefined value fails in Python', "{{ missing.attr }}", {}),
    ('map with a filter name, first and last on strings, wordcount, center', "{{ ['a', 'b']|map('upper')|list }} {{ 'xyz'|first }}{{ 'xyz'|last }} {{ 'one two  three'|wordcount }} [{{ 'ab'|center(6) }}]", {}),
    ('dict methods and items filter', "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{{ d.get('z', 'dflt') }} {{ d|items|list }} {{ d.keys()|list }}", {'d': {'x': 1, 'y': [2]}}),
    ('tests: iterable, mapping, string, number, defined', "{{ {} is iterable }} {{ 'a' is iterable }} {{ {} is mapping }} {{ 'a' is string }} {{ 1.5 is number }} {{ x is defined }} {{ y is not defined }}", {'x': 1}),
]


def main():
    env = environment()
    out = []
    for name, source, context in CASES:
        out.append({'name': name, 'template': source, 'context': context, **render(env, source, context)})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, 'w', encoding='utf-8') as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write('\n')
    print(f'{len(out)} cases written to {os.path.relpath(OUT, ROOT)}')


if __name__ == '__main__':
    main()
