import t from 'tap'
import { defaultConfig, loadConfig, SETTINGS } from '../src/config.js'
import { ConfigError } from '../src/errors.js'

t.test('no variables: the embedded defaults serve examples/', async (t) => {
  const config = loadConfig({})
  t.same(config, defaultConfig)
  t.equal(config.port, 8080)
  t.equal(config.bodyLimit, 16 * 1024 * 1024)
  t.match(config.pluginsDir, /examples\/plugins$/)
  t.match(config.rubricsDir, /examples\/rubrics$/)
  t.equal(config.judgeBaseUrl, undefined)
})

t.test('variables are parsed into typed settings', async (t) => {
  const config = loadConfig({
    PORT: '9000',
    HOST: '0.0.0.0',
    LOG_LEVEL: 'warn',
    ARBITER_BODY_LIMIT: '2MiB',
    ARBITER_ENDPOINT_ALLOW: 'scorer.corp, 10.0.0.0/8 ,',
    ARBITER_JUDGE_BASE_URL: 'http://127.0.0.1:8000/v1/',
    ARBITER_METRICS_AUTH: 'true',
    ARBITER_JUDGE_TIMEOUT_S: '2.5'
  })
  t.equal(config.port, 9000)
  t.equal(config.host, '0.0.0.0')
  t.equal(config.logLevel, 'warn')
  t.equal(config.bodyLimit, 2 * 1024 * 1024)
  t.same(config.endpointAllow, ['scorer.corp', '10.0.0.0/8'])
  t.equal(config.judgeBaseUrl, 'http://127.0.0.1:8000/v1', 'trailing slash dropped')
  t.equal(config.metricsAuth, true)
  t.equal(config.judgeTimeoutS, 2.5)
})

t.test('an invalid value names the variable', async (t) => {
  const cases: Array<[Record<string, string>, string]> = [
    [{ PORT: 'abc' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ ARBITER_BODY_LIMIT: '16 potatoes' }, 'ARBITER_BODY_LIMIT'],
    [{ ARBITER_BODY_LIMIT: '0' }, 'ARBITER_BODY_LIMIT'],
    [{ ARBITER_JUDGE_BASE_URL: 'ftp://x' }, 'ARBITER_JUDGE_BASE_URL'],
    [{ ARBITER_MAX_TIMEOUT_S: '-1' }, 'ARBITER_MAX_TIMEOUT_S'],
    [{ ARBITER_METRICS_AUTH: 'maybe' }, 'ARBITER_METRICS_AUTH'],
    [{ ARBITER_ENDPOINT_RETRIES: '5' }, 'ARBITER_ENDPOINT_RETRIES']
  ]
  for (const [env, variable] of cases) {
    let caught: unknown
    try { loadConfig(env) } catch (error) { caught = error }
    t.ok(caught instanceof ConfigError, `${variable}: a ConfigError`)
    t.equal((caught as ConfigError).variable, variable)
    t.match((caught as ConfigError).message, new RegExp(`^${variable}: `))
  }
})

t.test('an unknown ARBITER_ variable is refused (a typo would otherwise be silently ignored)', async (t) => {
  t.throws(() => loadConfig({ ARBITER_PLUGIN_DIR: '/srv/plugins' }), /ARBITER_PLUGIN_DIR: is not an Arbiter setting/)
  t.doesNotThrow(() => loadConfig({ PATH: '/usr/bin', HOME: '/root' }), 'other variables are none of our business')
})

t.test('Kubernetes service-link variables are not mistaken for settings', async (t) => {
  const links = {
    ARBITER_SERVICE_HOST: '10.0.0.7',
    ARBITER_SERVICE_PORT: '80',
    ARBITER_SERVICE_PORT_HTTP: '80',
    ARBITER_PORT: 'tcp://10.0.0.7:80',
    ARBITER_PORT_80_TCP: 'tcp://10.0.0.7:80',
    ARBITER_PORT_80_TCP_PROTO: 'tcp',
    ARBITER_PORT_80_TCP_PORT: '80',
    ARBITER_PORT_80_TCP_ADDR: '10.0.0.7',
    ARBITER_METRICS_SERVICE_HOST: '10.0.0.8',
    ARBITER_METRICS_PORT_9090_TCP: 'tcp://10.0.0.8:9090'
  }
  t.doesNotThrow(() => loadConfig(links))
  t.throws(() => loadConfig({ ARBITER_PORT: '9000' }), /ARBITER_PORT: is not an Arbiter setting/, 'without its _SERVICE_HOST sibling it is a typo')
})

t.test('every setting has a documented ARBITER_ name, or is one of HOST, PORT, LOG_LEVEL', async (t) => {
  for (const setting of Object.values(SETTINGS)) {
    t.ok(setting.env.startsWith('ARBITER_') || ['HOST', 'PORT', 'LOG_LEVEL'].includes(setting.env), setting.env)
    t.ok(setting.doc.length > 10, `${setting.env} is documented`)
  }
})
