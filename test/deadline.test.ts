// Deadline: the stop signal every wait of one verification shares (queue slot, socket, retry sleep).
import t from 'tap'
import { Deadline } from '../src/deadline.js'

t.test('passes: stops with a TimeoutError naming what, calls each listener once', async (t) => {
  const deadline = new Deadline(30, 'judge')
  const calls: string[] = []
  const removed = (): void => { calls.push('removed') }
  deadline.addEventListener('abort', () => { calls.push('first') })
  deadline.addEventListener('abort', removed)
  deadline.addEventListener('abort', () => { calls.push('second') })
  deadline.removeEventListener('abort', removed)
  t.equal(deadline.aborted, false)
  t.ok(deadline.fits(0))
  t.notOk(deadline.fits(60_000))
  await new Promise((resolve) => setTimeout(resolve, 80))
  t.equal(deadline.aborted, true)
  t.equal(deadline.passed, true)
  t.match(deadline.reason, { name: 'TimeoutError', message: 'the judge deadline passed' })
  t.throws(() => { deadline.throwIfAborted() }, { name: 'TimeoutError' })
  t.same(calls, ['first', 'second'])
  deadline.addEventListener('abort', () => { calls.push('late') })
  deadline.stop(new Error('again'))
  t.same(calls, ['first', 'second'], 'stopping twice calls nobody; a listener added after the stop never runs')
  t.match(deadline.reason, { name: 'TimeoutError' }, 'the first reason stays')
})

t.test('stopped early: not passed, the given reason, and the timer is gone', async (t) => {
  const deadline = new Deadline(60_000, 'endpoint')
  const reason = new Error('a sibling sample failed')
  deadline.stop(reason)
  t.equal(deadline.aborted, true)
  t.equal(deadline.passed, false)
  t.equal(deadline.reason, reason)
  deadline.clear()
})

t.test('sleep: resolves after its time, rejects with the reason when stopped first', async (t) => {
  const deadline = new Deadline(60_000, 'endpoint')
  t.teardown(() => { deadline.clear() })
  await deadline.sleep(5)
  const reason = new Error('stopped')
  const sleeping = deadline.sleep(60_000)
  setTimeout(() => { deadline.stop(reason) }, 10)
  await t.rejects(sleeping, reason)
  await t.rejects(deadline.sleep(1), reason, 'already stopped: rejects at once')
})

t.test('a throwing listener neither stops the others nor is swallowed', async (t) => {
  const deadline = new Deadline(60_000, 'judge')
  const rethrown: Array<() => void> = []
  const original = globalThis.queueMicrotask
  globalThis.queueMicrotask = (callback) => { rethrown.push(callback) }
  t.teardown(() => { globalThis.queueMicrotask = original })
  let after = false
  deadline.addEventListener('abort', () => { throw new Error('listener bug') })
  deadline.addEventListener('abort', () => { after = true })
  deadline.stop(new Error('stop'))
  globalThis.queueMicrotask = original
  t.equal(after, true, 'the next listener ran')
  t.equal(rethrown.length, 1)
  t.throws(() => { rethrown[0]() }, { message: 'listener bug' }, 'the error is thrown again, outside the stop')
})
