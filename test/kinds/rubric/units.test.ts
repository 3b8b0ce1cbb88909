// The pure parts of the rubric kind: answer checking, scoring, truncation, boundaries, the
// cache, the limiter and Retry-After parsing.
import t from 'tap'
import { LruTtlCache } from '../../../src/kinds/rubric/cache.js'
import { retryAfterMs } from '../../../src/retry-after.js'
import { Slots } from '../../../src/slots.js'
import { drawBoundary, truncateMiddle } from '../../../src/kinds/rubric/prompt.js'
import { numberCriteria, type Rubric } from '../../../src/kinds/rubric/rubric.js'
import { aggregate, checkAnswer, extractJson, score } from '../../../src/kinds/rubric/verdict.js'
import { answer } from './support.js'

const rubric: Rubric = {
  owner: 'o', name: 'n', version: 1, ref: 'o/n@1', format: 'yaml', contentHash: 'sha256:x', path: 'o/n/1.yaml',
  title: 'T', description: '', passThreshold: 0.6, requiresReference: false, instructions: '', judge: {},
  dimensions: numberCriteria([
    { name: 'a', weight: 1, description: 'a', criteria: ['first', 'second'] },
    { name: 'b', weight: 0, description: 'b' }
  ])
}

t.test('extractJson finds the object in a fence, in prose, or as is', async (t) => {
  t.equal(extractJson('{"a":1}'), '{"a":1}')
  t.equal(extractJson('```json\n{"a":1}\n```'), '{"a":1}')
  t.equal(extractJson('```\n{"a":1}```'), '{"a":1}')
  t.equal(extractJson('Sure! {"a":1} Hope this helps.'), '{"a":1}')
  t.equal(extractJson('no json here'), 'no json here')
  t.equal(extractJson('<think>maybe {"a":0}? no.</think>\n{"a":1}'), '{"a":1}', 'a reasoning block is not the answer')
})

t.test('checkAnswer reports every problem, and accepts what is valid', async (t) => {
  const problem = (content: string): string => {
    const checked = checkAnswer(content, rubric)
    return checked.ok ? 'ok' : checked.problem
  }
  t.equal(problem(answer({ a: 1, b: 0 })), 'ok')
  t.equal(problem(''), 'the answer was empty')
  t.equal(problem('[1]'), 'the answer is not a JSON object')
  t.match(problem('{"__proto__": {"x": 1}}'), /not valid JSON/)
  t.match(problem('{"dimension_scores": {}, "confidence": 1, "evidence": []}'), /dimension_scores must be an array/)
  t.match(problem('{"dimension_scores": [1], "confidence": 1, "evidence": []}'), /dimension_scores\[0\] is not an object/)
  t.match(problem(answer({ a: 1, b: 0, c: 1 })), /"c" is not a rubric dimension/)
  t.match(problem(JSON.stringify({ dimension_scores: [{ dimension: 'a', score: 1 }, { dimension: 'a', score: 1 }, { dimension: 'b', score: 1 }], confidence: 1, evidence: [] })), /"a" is scored more than once/)
  t.match(problem(JSON.stringify({ dimension_scores: [{ dimension: 'a', score: 1, reason: 5 }, { dimension: 'b', score: 1 }], confidence: 1, evidence: [] })), /reason of "a" must be a string/)
  t.match(problem(JSON.stringify({ dimension_scores: [{ dimension: 'a', score: 1, unmet_criteria: 'C1' }, { dimension: 'b', score: 1 }], confidence: 1, evidence: [] })), /must be an array of criterion ids/)
  t.match(problem(answer({ a: 1, b: 1 }, { unmet: { a: ['C9'] } })), /names "C9", which is not one of its criteria \(C1, C2\)/)
  t.match(problem(answer({ a: 1, b: 1 }, { unmet: { b: ['C1'] } })), /it has none/)
  t.match(problem(answer({ a: 1, b: NaN })), /score of "b"/, 'NaN (serialised as null) is not a score')
  t.match(problem(answer({ a: 1, b: 1 }, { evidence: [1] })), /evidence must be an array of strings/)
  t.match(problem(answer({ a: 1, b: 1 }, { confidence: '0.9' })), /confidence must be a number/)
  t.match(problem(answer({})), /missing dimensions: "a", "b"/)

  const byText = checkAnswer(answer({ a: 0, b: 1 }, { unmet: { a: ['second', 'C2', 'C1'] } }), rubric)
  t.ok(byText.ok)
  if (byText.ok) t.same(byText.answer.dimensions.a.unmet, ['C2', 'C1'], 'criteria named by text or id, once each')
  const noReason = checkAnswer(JSON.stringify({ dimension_scores: [{ dimension: 'a', score: 1 }, { dimension: 'b', score: 1 }], confidence: 1, evidence: [] }), rubric)
  t.ok(noReason.ok && noReason.answer.dimensions.a.reason === '', 'a missing reason is an empty one')
})

t.test('score: weighted mean, zero weights ignored, threshold with a tolerance', async (t) => {
  const one = checkAnswer(answer({ a: 0.3, b: 1 }, { unmet: { a: ['C2'] } }), rubric)
  if (!one.ok) throw new Error(one.problem)
  const scored = score(aggregate([one.answer], rubric), rubric, 0.3)
  t.equal(scored.score, 0.3, 'b has weight 0')
  t.equal(scored.verdict, 'PASS')
  t.same(scored.failed_criteria, ['second'])
  t.equal(score(aggregate([one.answer], rubric), rubric, 0.31).verdict, 'FAIL')

  const two = checkAnswer(answer({ a: 0.9, b: 1 }), rubric)
  if (!two.ok) throw new Error(two.problem)
  const both = aggregate([one.answer, two.answer], rubric)
  t.equal(both.dimensions.a.score, (0.3 + 0.9) / 2)
  t.equal(score(both, rubric, 0.6).verdict, 'PASS', '(0.3 + 0.9) / 2 = 0.6 reaches 0.6 despite floating point')
  t.same(both.dimensions.a.unmet, ['C2'], 'unmet in half of the samples counts as unmet')
})

t.test('truncateMiddle keeps head and tail and never splits a surrogate pair', async (t) => {
  t.same(truncateMiddle('short', 10), { text: 'short', truncated: false, omitted: 0 })
  const cut = truncateMiddle('a'.repeat(50) + 'b'.repeat(50), 20)
  t.equal(cut.truncated, true)
  t.equal(cut.omitted, 80)
  t.match(cut.text, /^a{10}\n\n\[… 80 characters cut from the middle by Arbiter to fit the judge budget of 20 characters …\]\n\nb{10}$/)
  const emoji = truncateMiddle('😀'.repeat(20), 11)
  t.notOk(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(emoji.text), 'no lone surrogate')
})

t.test('drawBoundary never returns a boundary present in the data', async (t) => {
  const draws = ['collide', 'collide', 'fresh']
  t.equal(drawBoundary(['text with collide in it'], () => draws.shift() as string), 'fresh')
  t.match(drawBoundary(['x']), /^[0-9a-f]{32}$/)
})

t.test('LruTtlCache: least recently used goes first, entries expire, size 0 is off', async (t) => {
  let now = 0
  const cache = new LruTtlCache<number>({ max: 2, ttlMs: 100, now: () => now })
  cache.set('a', 1)
  cache.set('b', 2)
  t.equal(cache.get('a'), 1, 'a is now the most recent')
  cache.set('c', 3)
  t.equal(cache.get('b'), undefined, 'b was evicted')
  t.equal(cache.get('a'), 1)
  t.equal(cache.size, 2)
  now = 100
  t.equal(cache.get('a'), undefined, 'expired')
  t.equal(cache.size, 1)
  cache.clear()
  t.equal(cache.size, 0)
  const off = new LruTtlCache<number>({ max: 0, ttlMs: 100 })
  off.set('a', 1)
  t.equal(off.enabled, false)
  t.equal(off.get('a'), undefined)
})

t.test('Slots: FIFO queue, aborted waiters leave it', async (t) => {
  const limiter = new Slots(1)
  const never = new AbortController().signal
  const first = await limiter.acquire(never)
  const order: string[] = []
  const aborted = new AbortController()
  const second = limiter.acquire(aborted.signal)
  const third = limiter.acquire(never).then((release) => { order.push('third'); return release })
  t.equal(limiter.queued, 2)
  aborted.abort(new Error('gone'))
  await t.rejects(second, { message: 'gone' })
  t.equal(limiter.queued, 1)
  first()
  first() // releasing twice is harmless
  const release = await third
  t.same(order, ['third'])
  t.equal(limiter.active, 1)
  release()
  t.equal(limiter.active, 0)
  await t.rejects(limiter.acquire(AbortSignal.abort(new Error('already'))), { message: 'already' })
})

t.test('retryAfterMs (the judge\'s, the endpoint kind\'s and the client\'s parser): seconds or an HTTP date', async (t) => {
  t.equal(retryAfterMs('3'), 3000)
  t.equal(retryAfterMs('1.5'), 1500)
  t.equal(retryAfterMs(['2']), 2000)
  t.equal(retryAfterMs(undefined), undefined)
  t.equal(retryAfterMs(''), undefined)
  t.equal(retryAfterMs('soon'), undefined)
  t.equal(retryAfterMs('Thu, 01 Jan 1970 00:00:10 GMT', 0), 10_000)
  t.equal(retryAfterMs('Thu, 01 Jan 1970 00:00:10 GMT', 20_000), 0, 'a past date means now')
})
