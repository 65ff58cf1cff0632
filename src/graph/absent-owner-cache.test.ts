import { AbsentOwnerCache } from './absent-owner-cache.ts';

describe('AbsentOwnerCache', () => {
  test('remembers what was added and nothing else', () => {
    const c = new AbsentOwnerCache();
    expect(c.size).toBe(0);
    expect(c.has('a')).toBe(false);
    c.add('a');
    expect(c.has('a')).toBe(true);
    expect(c.has('b')).toBe(false);
    expect(c.size).toBe(1);
  });

  test('adding a key twice keeps one entry', () => {
    const c = new AbsentOwnerCache(3);
    c.add('a');
    c.add('a');
    expect(c.size).toBe(1);
  });

  test('is bounded: the least recently used entry goes first', () => {
    const c = new AbsentOwnerCache(3);
    for (const k of ['a', 'b', 'c', 'd']) c.add(k);
    expect(c.size).toBe(3);
    expect(c.has('a')).toBe(false);
    expect([c.has('b'), c.has('c'), c.has('d')]).toEqual([true, true, true]);
  });

  test('the default capacity is 500', () => {
    const c = new AbsentOwnerCache();
    for (let i = 0; i < 501; i++) c.add(`k${i}`);
    expect(c.size).toBe(500);
    expect(c.has('k0')).toBe(false);
    expect(c.has('k1')).toBe(true);
    expect(c.has('k500')).toBe(true);
  });

  test('a hit refreshes the entry', () => {
    const c = new AbsentOwnerCache(3);
    for (const k of ['a', 'b', 'c']) c.add(k);
    expect(c.has('a')).toBe(true);
    c.add('d');
    // 'b' was the least recently used once 'a' was hit.
    expect(c.has('b')).toBe(false);
    expect(c.has('a')).toBe(true);
    expect(c.size).toBe(3);
  });

  test('re-adding refreshes the entry', () => {
    const c = new AbsentOwnerCache(2);
    c.add('a');
    c.add('b');
    c.add('a');
    c.add('c');
    expect(c.has('b')).toBe(false);
    expect(c.has('a')).toBe(true);
    expect(c.has('c')).toBe(true);
  });

  test('a miss does not evict anything', () => {
    const c = new AbsentOwnerCache(2);
    c.add('a');
    c.add('b');
    expect(c.has('x')).toBe(false);
    expect(c.size).toBe(2);
    expect(c.has('a')).toBe(true);
    expect(c.has('b')).toBe(true);
  });
});
