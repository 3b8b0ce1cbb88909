import t from 'tap'
import { flattenTrajectory } from '../src/trajectory.js'

t.test('a plain string stays a string', async (t) => {
  t.equal(flattenTrajectory('The answer is 4'), 'The answer is 4')
  t.equal(flattenTrajectory(''), '')
})

t.test('a message contributes its string content', async (t) => {
  t.equal(flattenTrajectory({ role: 'assistant', content: 'It is 4.' }), 'It is 4.')
})

t.test('content as a list of parts is flattened recursively', async (t) => {
  const openai = { role: 'assistant', content: [{ type: 'text', text: 'First,' }, { type: 'text', text: 'it is 4.' }] }
  t.equal(flattenTrajectory(openai), 'First,\nit is 4.', 'OpenAI chat content parts')

  const responses = [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Answer: 4', annotations: [] }] }]
  t.equal(flattenTrajectory(responses), 'Answer: 4', 'Responses-API output_text items')

  const anthropic = { role: 'assistant', content: [{ type: 'text', text: 'Let me compute.' }, { type: 'tool_use', id: 'toolu_1', name: 'calc', input: { expr: '2+2' } }, { type: 'text', text: '4' }] }
  t.equal(
    flattenTrajectory(anthropic),
    'Let me compute.\n{"type":"tool_use","id":"toolu_1","name":"calc","input":{"expr":"2+2"}}\n4',
    'Anthropic text blocks; a tool_use block has neither field and is rendered as JSON, not dropped'
  )
})

t.test('objects with text, and nested lists, are joined with newlines', async (t) => {
  t.equal(flattenTrajectory({ text: 'from text' }), 'from text')
  t.equal(flattenTrajectory(['a', ['b', ['c', { content: 'd' }]], { text: 'e' }]), 'a\nb\nc\nd\ne')
  t.equal(flattenTrajectory([]), '')
})

t.test('content wins over text when both are present', async (t) => {
  t.equal(flattenTrajectory({ content: 'content', text: 'text' }), 'content')
})

t.test('null content falls back to text, then to JSON', async (t) => {
  t.equal(flattenTrajectory({ role: 'assistant', content: null, text: 'fallback' }), 'fallback')
  t.equal(flattenTrajectory({ role: 'assistant', content: null, tool_calls: [{ id: 'c1' }] }), '{"role":"assistant","content":null,"tool_calls":[{"id":"c1"}]}')
})

t.test('scalars are rendered as JSON rather than dropped', async (t) => {
  t.equal(flattenTrajectory(null), 'null')
  t.equal(flattenTrajectory(42), '42')
  t.equal(flattenTrajectory(0.5), '0.5')
  t.equal(flattenTrajectory(true), 'true')
  t.equal(flattenTrajectory(false), 'false')
  t.equal(flattenTrajectory([1, null, 'x']), '1\nnull\nx')
})

t.test('objects with neither field are rendered as JSON', async (t) => {
  t.equal(flattenTrajectory({ answer: 4, steps: ['2+2'] }), '{"answer":4,"steps":["2+2"]}')
  t.equal(flattenTrajectory({}), '{}')
})
