// Property-based fuzzing of the HTTP surface with fast-check against app.inject. Invariants:
// the status is always one of 200, 400, 401, 413, 415, 502, 503 (never 500); every body matches
// its declared schema; a 200 carries a finite reward; no prototype is polluted.
// A fixed seed in CI; FUZZ_RUNS=5000 FUZZ_SEED=… for a longer run on demand.
import t from 'tap'
import fc from 'fast-check'
import { Compile } from 'typebox/compile'
import { ErrorBodySchema } from '../../schemas/error.js'
import { VerifyResponseSchema } from '../../schemas/result.js'
import { BatchResponseSchema } from '../../schemas/batch.js'
import type { LookupFunction } from '../../src/kinds/endpoint/egress.js'
import { buildTestApp, type TestContext } from '../helpers/build-app.js'
import { json, startUpstream } from '../helpers/upstream.js'

const RUNS = Number(process.env.FUZZ_RUNS ?? 150)
const SEED = Number(process.env.FUZZ_SEED ?? 20261129)
const ALLOWED = new Set([200, 400, 401, 413, 415, 502, 503])
const errorCheck = Compile(ErrorBodySchema)
const resultCheck = Compile(VerifyResponseSchema)
const batchCheck = Compile(BatchResponseSchema)

// No name ever resolves: fuzzed URLs must never leave the machine.
const noDns: LookupFunction = (hostname, _options, callback) => {
  callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '')
}

const prototypeKeys = (): string[] => [Object.prototype, Array.prototype, Function.prototype].flatMap((p) => Object.getOwnPropertyNames(p)).sort()

function manifestArbitrary (upstreamUrl: string) {
  const kind = fc.oneof(fc.constantFrom('endpoint', 'plugin', 'rubric'), fc.string(), fc.constant(null), fc.integer())
  const ref = fc.oneof(
    fc.constantFrom(upstreamUrl, `${upstreamUrl}/score`, 'verify:score_arithmetic', 'verify:missing', 'alice/arithmetic-correctness', 'alice/none@3', 'http://169.254.169.254/', 'http://[::ffff:a9fe:a9fe]/', 'http://2130706433/', 'file:///etc/passwd', '../../x:y'),
    fc.webUrl(),
    fc.string(),
    fc.constant(''),
    fc.constant(null)
  )
  const verifier = fc.record({
    kind,
    ref,
    timeout_s: fc.option(fc.oneof(fc.double({ min: -1, max: 2, noNaN: false }), fc.constant(null), fc.string()), { nil: undefined }),
    pass_threshold: fc.option(fc.oneof(fc.double(), fc.constant(null), fc.boolean()), { nil: undefined })
  }, { requiredKeys: [] })
  return fc.record({
    name: fc.option(fc.oneof(fc.constantFrom('arithmetic', 'exact-match-js', 'nope'), fc.string()), { nil: undefined }),
    version: fc.option(fc.string(), { nil: undefined }),
    digest: fc.option(fc.string(), { nil: undefined }),
    verifier: fc.oneof(verifier, fc.jsonValue())
  }, { requiredKeys: [] })
}

function bodyArbitrary (upstreamUrl: string) {
  const request = fc.record({
    manifest: fc.oneof(manifestArbitrary(upstreamUrl), fc.jsonValue()),
    task: fc.oneof(fc.dictionary(fc.string(), fc.jsonValue()), fc.jsonValue(), fc.record({ prompt: fc.string(), reference: fc.string() })),
    trajectory: fc.oneof(fc.jsonValue(), fc.string({ maxLength: 2000 }), fc.array(fc.record({ role: fc.string(), content: fc.jsonValue() })))
  }, { requiredKeys: [] })
  return fc.oneof(
    { weight: 6, arbitrary: request.map((value) => JSON.stringify(value)) },
    { weight: 2, arbitrary: fc.jsonValue().map((value) => JSON.stringify(value)) },
    { weight: 1, arbitrary: fc.string() },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 3000 }).map((depth) => `{"manifest":{"verifier":{"kind":"endpoint","ref":"${upstreamUrl}"}},"task":{},"trajectory":${'['.repeat(depth)}${']'.repeat(depth)}}`) },
    { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'prototype').map((key) => `{"manifest":{"verifier":{"kind":"endpoint","ref":"${upstreamUrl}"}},"task":{"${key}":{"polluted":true,"prototype":{"polluted":true}}},"trajectory":"x"}`) },
    { weight: 1, arbitrary: fc.constant(`{"manifest":{"verifier":{"kind":"endpoint","ref":"${upstreamUrl}"}},"task":{"constructor":{"prototype":{"polluted":true}}},"trajectory":"x"}`) },
    { weight: 1, arbitrary: fc.integer({ min: 70_000, max: 200_000 }).map((size) => JSON.stringify({ manifest: { verifier: { kind: 'endpoint', ref: upstreamUrl } }, task: {}, trajectory: 'x'.repeat(size) })) }
  )
}

const contentTypes = fc.oneof(
  { weight: 8, arbitrary: fc.constant('application/json') },
  { weight: 1, arbitrary: fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=latin1', '', 'application/xml') }
)

async function fuzzApp (t: TestContext) {
  const upstream = await startUpstream(t, json(200, { reward: 0.5 }))
  const { app } = await buildTestApp(t, { bodyLimit: 64 * 1024, endpointAllow: [upstream.url], logLevel: 'silent', judgeTimeoutS: 1 }, { lookup: noDns })
  return { app, upstream }
}

t.test('POST /v1/verify under arbitrary bodies', async (t) => {
  const { app, upstream } = await fuzzApp(t)
  const before = prototypeKeys()
  await fc.assert(fc.asyncProperty(bodyArbitrary(upstream.url), contentTypes, fc.boolean(), async (payload, contentType, invalidUtf8) => {
    const raw = invalidUtf8 ? Buffer.concat([Buffer.from(payload.slice(0, 40)), Buffer.from([0xc3, 0x28, 0xff, 0xfe]), Buffer.from(payload.slice(40))]) : payload
    const response = await app.inject({ method: 'POST', url: '/v1/verify', payload: raw, headers: contentType === '' ? {} : { 'content-type': contentType } })
    if (!ALLOWED.has(response.statusCode)) throw new Error(`status ${response.statusCode}: ${response.body.slice(0, 300)}`)
    const body = response.json() as Record<string, unknown>
    if (response.statusCode === 200) {
      if (!resultCheck.Check(body)) throw new Error(`200 body off schema: ${response.body.slice(0, 300)}`)
      if (typeof body.reward !== 'number' || !Number.isFinite(body.reward)) throw new Error(`200 without a finite reward: ${response.body}`)
    } else {
      if (!errorCheck.Check(body)) throw new Error(`error body off schema: ${response.body.slice(0, 300)}`)
      if ('reward' in body) throw new Error('an error body carries a reward')
      if (body.statusCode !== response.statusCode) throw new Error('statusCode differs from the status')
      if (response.statusCode === 502 && body.verifier === undefined) throw new Error(`a 502 that names no verifier: ${response.body}`)
    }
  }), { numRuns: RUNS, seed: SEED })
  t.same(prototypeKeys(), before, 'no prototype gained a property')
  t.equal(({} as Record<string, unknown>).polluted, undefined)
})

t.test('POST /v1/verify/batch under arbitrary envelopes and items', async (t) => {
  const { app, upstream } = await fuzzApp(t)
  const before = prototypeKeys()
  const item = bodyArbitrary(upstream.url).map((text) => { try { return JSON.parse(text) as unknown } catch { return text } })
  const envelope = fc.oneof(
    fc.record({ items: fc.array(item, { maxLength: 8 }) }),
    fc.record({ manifest: manifestArbitrary(upstream.url), items: fc.array(item, { maxLength: 8 }) }),
    fc.jsonValue()
  )
  await fc.assert(fc.asyncProperty(envelope, async (value) => {
    const response = await app.inject({ method: 'POST', url: '/v1/verify/batch', payload: JSON.stringify(value), headers: { 'content-type': 'application/json' } })
    if (!ALLOWED.has(response.statusCode)) throw new Error(`status ${response.statusCode}: ${response.body.slice(0, 300)}`)
    const body = response.json() as Record<string, unknown>
    if (response.statusCode !== 200) {
      if (!errorCheck.Check(body)) throw new Error(`error body off schema: ${response.body.slice(0, 300)}`)
      return
    }
    if (!batchCheck.Check(body)) throw new Error(`batch body off schema: ${response.body.slice(0, 300)}`)
    for (const result of body.results as Array<Record<string, unknown>>) {
      if ('statusCode' in result) {
        if (!errorCheck.Check(result) || !ALLOWED.has(result.statusCode as number)) throw new Error(`item error off schema: ${JSON.stringify(result).slice(0, 300)}`)
      } else if (!resultCheck.Check(result) || !Number.isFinite(result.reward)) {
        throw new Error(`item result off schema: ${JSON.stringify(result).slice(0, 300)}`)
      }
    }
  }), { numRuns: Math.ceil(RUNS / 2), seed: SEED })
  t.same(prototypeKeys(), before, 'no prototype gained a property')
})
