#!/usr/bin/env python3
"""Writes examples/sql/notes.sql: a small notes app's SQL (deterministic; no arguments).

Folders, notes with tags, edits, moves, deletions and a few rolled-back transactions, about
3 000 statements. Run it to regenerate the file after changing it:
    python3 examples/sql/gen_notes.py > examples/sql/notes.sql
"""

state = 12345


def rand(n):
    """A deterministic number in 0..n (a 31-bit LCG)."""
    global state
    state = (state * 1103515245 + 12345) % (1 << 31)
    return (state >> 8) % n


WORDS = "pcm journal frame portion page write bit cell wear flip sqlite note meeting buy milk call idea plan draft read".split()


def text(n):
    return " ".join(WORDS[rand(len(WORDS))] for _ in range(n))


out = [
    "-- A notes app: folders, notes, tags (examples/sql/gen_notes.py writes this file).",
    "CREATE TABLE folder(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);",
    "CREATE TABLE note(id INTEGER PRIMARY KEY, folder INTEGER NOT NULL REFERENCES folder(id),",
    "  title TEXT NOT NULL, body TEXT, updated INTEGER NOT NULL);",
    "CREATE INDEX note_by_folder ON note(folder, updated);",
    "CREATE TABLE tag(note INTEGER NOT NULL, tag TEXT NOT NULL, PRIMARY KEY(note, tag)) WITHOUT ROWID;",
    "BEGIN;",
]
for i, f in enumerate(["inbox", "work", "home", "ideas", "archive"]):
    out.append(f"INSERT INTO folder(id, name) VALUES({i + 1}, '{f}');")
out.append("COMMIT;")
notes = []
next_id = 1
clock = 1000
statements = 0
while statements < 3000:
    clock += 1 + rand(60)
    r = rand(100)
    if r < 40 or len(notes) < 20:
        nid = next_id
        next_id += 1
        notes.append(nid)
        tags = sorted({WORDS[rand(len(WORDS))] for _ in range(1 + rand(3))})
        out.append("BEGIN;")
        out.append(
            f"INSERT INTO note(id, folder, title, body, updated) VALUES({nid}, {1 + rand(4)}, "
            f"'{text(3)}', '{text(20 + rand(60))}', {clock});"
        )
        out += [f"INSERT INTO tag(note, tag) VALUES({nid}, '{t}');" for t in tags]
        out.append("COMMIT;")
        statements += 3 + len(tags)
    elif r < 70:
        nid = notes[rand(len(notes))]
        out.append(f"UPDATE note SET body = body || ' {text(5)}', updated = {clock} WHERE id = {nid};")
        statements += 1
    elif r < 80:
        nid = notes[rand(len(notes))]
        out.append(f"UPDATE note SET folder = {1 + rand(5)}, updated = {clock} WHERE id = {nid};")
        statements += 1
    elif r < 88:
        nid = notes.pop(rand(len(notes)))
        out += ["BEGIN;", f"DELETE FROM tag WHERE note = {nid};", f"DELETE FROM note WHERE id = {nid};", "COMMIT;"]
        statements += 4
    elif r < 93:
        out += [
            "BEGIN;",
            f"UPDATE note SET folder = 5 WHERE folder = {1 + rand(4)} AND updated < {clock - 2000};",
            f"INSERT OR IGNORE INTO tag(note, tag) SELECT id, 'archived' FROM note WHERE folder = 5;",
            "COMMIT;",
        ]
        statements += 4
    elif r < 96:
        nid = notes[rand(len(notes))]
        out += ["BEGIN;", f"UPDATE note SET body = '' WHERE id = {nid};", "ROLLBACK;"]
        statements += 3
    else:
        out.append(f"SELECT count(*) FROM note WHERE folder = {1 + rand(5)};")
        statements += 1
print("\n".join(out))
