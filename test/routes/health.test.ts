import t from 'tap'
import { buildApp } from '../../src/app.js'
import { configWith } from '../../src/config.js'
import { buildTestApp, verifyBody } from '../helpers/build-app.js'

t.test('GET / says what this is and where the routes are', async (t) => {
  const { app } = await buildTestApp(t)
  const body = (await app.inject({ method: 'GET', url: '/' })).json()
  t.equal(body.name, 'arbiter')
  t.match(body.routes, { 'POST /v1/verify': String, 'GET /readyz': String })
})

t.test('/healthz is 200 whenever the process answers', async (t) => {
  const { app } = await buildTestApp(t)
  const response = await app.inject({ method: 'GET', url: '/healthz' })
  t.equal(response.statusCode, 200)
  t.same(response.json(), { status: 'ok' })
})

t.test('/readyz: 503 while starting, 200 when ready, 503 while draining, with reasons', async (t) => {
  const app = await buildApp(configWith())
  t.teardown(() => app.close())
  await app.ready()
  const starting = await app.inject({ method: 'GET', url: '/readyz' })
  t.equal(starting.statusCode, 503)
  t.match(starting.json(), { status: 'starting', reasons: [/starting/] })

  app.arbiter.lifecycle.markReady()
  const ready = await app.inject({ method: 'GET', url: '/readyz' })
  t.equal(ready.statusCode, 200)
  t.same(ready.json(), { status: 'ready' })

  app.arbiter.lifecycle.startDraining()
  const draining = await app.inject({ method: 'GET', url: '/readyz' })
  t.equal(draining.statusCode, 503)
  t.match(draining.json(), { status: 'draining', reasons: [/draining/] })
  t.equal(draining.headers['retry-after'], '1')

  const refused = await app.inject({ method: 'POST', url: '/v1/verify', payload: verifyBody('endpoint', 'http://127.0.0.1:9/') })
  t.equal(refused.statusCode, 503)
  t.equal(refused.json().code, 'ARB_SHUTTING_DOWN')
  t.equal(refused.json().retryable, true)
  t.equal(refused.headers['retry-after'], '1')
  t.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, 'still alive while draining')
})

t.test('GET /v1/verifiers lists every kind', async (t) => {
  const { app } = await buildTestApp(t, { endpointAllow: ['scorer.corp'] })
  const body = (await app.inject({ method: 'GET', url: '/v1/verifiers' })).json()
  t.same(Object.keys(body.kinds).sort(), ['endpoint', 'plugin', 'rubric'])
  t.match(body.kinds.endpoint, { available: true, default_timeout_s: 60, allowed: ['scorer.corp'] })
})

t.test('an unexpected error is a 500 with a generic message, logged with its cause', async (t) => {
  const app = await buildApp(configWith())
  t.teardown(() => app.close())
  app.get('/boom', async () => { throw new Error('database password is hunter2') })
  const response = await app.inject({ method: 'GET', url: '/boom', headers: { 'x-request-id': 'boom-1' } })
  t.equal(response.statusCode, 500)
  t.equal(response.json().code, 'ARB_INTERNAL')
  t.match(response.json().message, /request id boom-1/)
  t.notMatch(response.body, /hunter2|at .*\.ts/, 'no message or stack of the cause reaches the client')
})
