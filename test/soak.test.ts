// The short soak and shutdown-under-load runs (the long one: npm run soak -- --seconds 300 --shutdown).
import t from 'tap'
import { runSoak } from './soak/soak.js'

t.test('soak: every request answered once, counters agree, resources come back', async (t) => {
  const report = await runSoak({ durationS: 8, concurrency: 16, seed: 7, killEveryMs: 1000 })
  t.same(report.violations, [], JSON.stringify({ byStatus: report.byStatus, errors: report.connectionErrors }))
  t.ok(report.sent > 50, `sent ${report.sent}`)
  t.equal(report.answered, report.sent)
  t.ok(report.faultsInjected.workerKills > 0, 'workers were killed from outside')
  t.ok((report.byStatus['200'] ?? 0) > 0 && (report.byStatus['502'] ?? 0) > 0)
})

t.test('shutdown under load: SIGTERM mid-soak cuts off no accepted request, exit 0', async (t) => {
  const report = await runSoak({ durationS: 6, concurrency: 16, seed: 11, killEveryMs: 0, shutdownAfterS: 3 })
  t.same(report.violations, [], JSON.stringify({ byStatus: report.byStatus, errors: report.connectionErrors }))
  t.equal(report.exitCode, 0)
  t.equal(report.cutOffAccepted, 0)
  t.ok((report.byStatus['503'] ?? 0) > 0 || (report.connectionErrors.ECONNREFUSED ?? 0) > 0, 'work after SIGTERM was refused')
})
