import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { buildTestApp, verifyBody } from './helpers/build-app.js'
import { json, startUpstream } from './helpers/upstream.js'

t.test('with tokens set, /v1/ routes need one; health stays open; tokens never reach the log', async (t) => {
  const upstream = await startUpstream(t, json(200, { reward: 1 }))
  const test = await buildTestApp(t, { apiTokens: ['tok-alpha', 'tok-beta'] })
  const { app } = test
  const body = verifyBody('endpoint', upstream.url)

  const missing = await app.inject({ method: 'POST', url: '/v1/verify', payload: body })
  t.equal(missing.statusCode, 401)
  t.equal(missing.json().code, 'ARB_UNAUTHORIZED')
  t.match(missing.json().message, /Authorization: Bearer/)
  t.equal(missing.headers['www-authenticate'], 'Bearer realm="arbiter"')

  const wrong = await app.inject({ method: 'POST', url: '/v1/verify', payload: body, headers: { authorization: 'Bearer tok-alph' } })
  t.equal(wrong.statusCode, 401)
  const malformed = await app.inject({ method: 'GET', url: '/v1/verifiers', headers: { authorization: 'tok-alpha' } })
  t.equal(malformed.statusCode, 401)

  for (const token of ['tok-alpha', 'tok-beta']) {
    const ok = await app.inject({ method: 'POST', url: '/v1/verify', payload: body, headers: { authorization: `Bearer ${token}` } })
    t.equal(ok.statusCode, 200, token)
  }
  t.equal(upstream.received.length, 2, 'refused requests never reached a verifier')

  for (const url of ['/healthz', '/readyz', '/metrics', '/']) {
    t.equal((await app.inject({ method: 'GET', url })).statusCode, 200, `${url} stays open`)
  }
  t.notMatch(test.logText(), /tok-alpha|tok-beta/)
})

t.test('ARBITER_METRICS_AUTH protects /metrics too; tokens can come from a file', async (t) => {
  const dir = t.testdir({})
  const file = join(dir, 'tokens')
  writeFileSync(file, '# rollout workers\nfile-token\n\n')
  const { app } = await buildTestApp(t, { apiTokensFile: file, metricsAuth: true })
  t.equal((await app.inject({ method: 'GET', url: '/metrics' })).statusCode, 401)
  t.equal((await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer file-token' } })).statusCode, 200)
  t.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200)
})
