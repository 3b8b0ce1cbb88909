// An environment plugin in JavaScript: exact match of the final answer against task.reference.
// The trajectory is what the harness submitted: a string, or a list of chat messages whose last
// one holds the answer.

function finalAnswer (trajectory) {
  if (typeof trajectory === 'string') return trajectory
  if (Array.isArray(trajectory) && trajectory.length > 0) return finalAnswer(trajectory[trajectory.length - 1])
  if (trajectory !== null && typeof trajectory === 'object') return finalAnswer(trajectory.content ?? trajectory.text ?? '')
  return ''
}

export function exactMatch (task, trajectory) {
  if (typeof task.reference !== 'string' || task.reference.trim() === '') {
    throw new Error('this task has no reference; it cannot be scored')
  }
  const answer = finalAnswer(trajectory).trim()
  const expected = task.reference.trim()
  const success = answer === expected
  return {
    reward: success ? 1.0 : 0.0,
    success,
    message: success ? 'exact match' : `expected ${JSON.stringify(expected)}, got ${JSON.stringify(answer.slice(0, 200))}`
  }
}
