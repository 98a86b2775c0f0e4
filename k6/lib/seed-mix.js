// The design's request mix for k6 (goja JS cannot import the TypeScript generator, so this restates its
// parameters from native-bench/sim/seed-mix.ts): 32 tenants chosen by Zipf, each opening every request with its
// own system prompt (lognormal, median 720 tokens); user turns lognormal (median 100), a pasted document in 2 %
// of turns (Pareto from 2,500 tokens, prompts capped at 32,768); outputs lognormal (median 190, capped at 4,096)
// for a mean of ~1,800 prompt and ~300 output tokens; 30 % of conversations are chats (3 turns on average, up to
// 12) whose next turn carries every earlier turn. A VU keeps its current chat between iterations, so with an
// arrival-rate executor a chat's turns are spread over the run like real follow-ups.
// Text is common English words, about one Llama 3 token each.

const WORDS = ('the of and to in is was for on that with as by at from his it an were are which this be or '
  + 'has had not but first one their its new after who they have her she two been other when there all during '
  + 'into school time may years more most only over city some world would where later up such used many can '
  + 'state about national out known university united then made').split(' ');

export const MIX = {
  tenants: 32, systemMedian: 720, systemSigma: 0.7, systemMax: 6000, userMedian: 100, userSigma: 1.0,
  docProbability: 0.02, docMin: 2500, docAlpha: 1.3, outputMedian: 190, outputSigma: 0.95, outputMax: 4096,
  longestPrompt: 32768, chatProbability: 0.3, chatTurnsMean: 3, chatTurnsMax: 12,
};

/** Seeded generator (mulberry32) so a tenant's system prompt is the same text in every VU. */
/** @param {number} seed */
function rng(seed) {
  let a = seed >>> 0;
  return function () {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** @param {() => number} r @param {number} median @param {number} sigma */
function lognormal(r, median, sigma) {
  const u = 1 - r();
  const v = r();
  return median * Math.exp(sigma * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v));
}

/** @param {number} seed @param {number} n */
export function words(seed, n) {
  const r = rng(seed);
  const out = [];
  for (let i = 0; i < n; i++) out.push(WORDS[Math.floor(r() * WORDS.length)]);
  return out.join(' ');
}

/** Zipf(1) cumulative weights over the tenants. */
const tenantCum = (() => {
  const cum = [];
  let total = 0;
  for (let k = 1; k <= MIX.tenants; k++) { total += 1 / k; cum.push(total); }
  return cum.map((c) => c / total);
})();

/** @type {{ [tenant: number]: { text: string, tokens: number } }} */
const systemPrompts = {};
/** @param {number} tenant */
function systemPrompt(tenant) {
  if (!systemPrompts[tenant]) {
    const tokens = Math.round(Math.min(MIX.systemMax, Math.max(64, lognormal(rng(tenant * 7919 + 1), MIX.systemMedian, MIX.systemSigma))));
    systemPrompts[tenant] = { text: `You are tenant ${tenant}'s assistant. ${words(tenant + 1, tokens - 5)}`, tokens };
  }
  return systemPrompts[tenant];
}

/**
 * @typedef {{ role: string, content: string }} Msg
 * @typedef {{ tenant: number, messages: Msg[], tokens: number, turnsLeft: number }} Chat
 * @typedef {{ messages: Msg[], promptTokens: number, outputTokens: number, tenant: number, turn: number }} MixRequest
 */

/** @type {Chat | null} */
let chat = null;
let seq = 0;

/** The next request of this VU: the next turn of its chat, or a new conversation. @returns {MixRequest} */
export function nextRequest() {
  seq++;
  const r = Math.random;
  if (chat === null || chat.turnsLeft <= 0) {
    const u = r();
    const tenant = tenantCum.findIndex((c) => c > u);
    const isChat = r() < MIX.chatProbability;
    const turns = isChat ? Math.min(MIX.chatTurnsMax, 1 + Math.floor(Math.log(1 - r()) / Math.log(1 - 1 / MIX.chatTurnsMean))) : 1;
    const sys = systemPrompt(tenant);
    chat = { tenant, messages: [{ role: 'system', content: sys.text }], tokens: sys.tokens, turnsLeft: turns };
  }
  let user = Math.max(1, Math.round(lognormal(r, MIX.userMedian, MIX.userSigma)));
  if (r() < MIX.docProbability) user += Math.round(MIX.docMin / Math.pow(1 - r(), 1 / MIX.docAlpha));
  user = Math.min(user, MIX.longestPrompt - chat.tokens);
  const output = Math.max(1, Math.min(MIX.outputMax, Math.round(lognormal(r, MIX.outputMedian, MIX.outputSigma))));
  if (user < 1) { chat = null; return nextRequest(); }
  const messages = chat.messages.concat([{ role: 'user', content: words(__VU * 1000003 + seq, user) }]);
  const req = { messages, promptTokens: chat.tokens + user, outputTokens: output, tenant: chat.tenant, turn: (messages.length - 2) / 2 };
  // The reply joins the history the next turn carries (text of its length: only the size matters here).
  chat.messages = messages.concat([{ role: 'assistant', content: words(seq * 31 + 7, output) }]);
  chat.tokens += user + output;
  chat.turnsLeft--;
  return req;
}
