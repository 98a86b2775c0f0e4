// Step 2 of the goldens (scripts/goldens/render-goldens.py has the whole recipe): encodes each prompt Python's
// jinja2 rendered with @lenml/tokenizers, a tokenizer library the gateway does not use (production encodes
// byte-level models with its own BPE and the rest with @huggingface/tokenizers; @lenml is a separate port of
// the older transformers.js code, reached only through test/helpers/model-tokenizers.ts). As vLLM does:
// add_special_tokens=False for a rendered chat prompt; for Gemma 3, each image's <start_of_image> id replaced
// by the ids of "\n\n<start_of_image>" + 256 × <image_soft_token> + "<end_of_image>\n\n" encoded alone (the
// Gemma 3 processor's full image sequence, mm_tokens_per_image = 256, pan-and-scan off).
// Run: node --import tsx scripts/goldens/encode-goldens.ts (after `render`, before `hash`).
import { readFileSync, writeFileSync } from 'node:fs';
import { loadReferenceTokenizers, referenceTokenizer, type ModelName } from '../../test/helpers/model-tokenizers.ts';

interface Rendered { model: ModelName; name: string; text?: string; images: number; [k: string]: unknown }

const dir = new URL('../../test/fixtures/goldens/', import.meta.url);
const rendered = JSON.parse(readFileSync(new URL('rendered.json', dir), 'utf8')) as Rendered[];
await loadReferenceTokenizers(...new Set(rendered.map((r) => r.model)));

const GEMMA3_IMAGE = `\n\n<start_of_image>${'<image_soft_token>'.repeat(256)}<end_of_image>\n\n`;

const out = rendered.map((r) => {
  if (r.text === undefined) return r;
  const tok = referenceTokenizer(r.model);
  let ids = tok.encode(r.text, { add_special_tokens: false });
  if (r.images > 0) {
    if (r.model !== 'gemma3') throw new Error(`${r.model}: images are only modelled for gemma3`);
    const boi = tok.encode('<start_of_image>', { add_special_tokens: false });
    if (boi.length !== 1) throw new Error('<start_of_image> is not one token');
    const expansion = tok.encode(GEMMA3_IMAGE, { add_special_tokens: false });
    let left = r.images;
    ids = ids.flatMap((id) => (id === boi[0] && left-- > 0 ? expansion : [id]));
    if (left > 0) throw new Error(`${r.name}: fewer <start_of_image> than images`);
  }
  return { ...r, ids };
});
writeFileSync(new URL('encoded.json', dir), `${JSON.stringify(out, null, 1)}\n`);
console.log(`${out.length} prompts encoded`);
