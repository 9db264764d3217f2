"""The checkpoint store's CQL: every statement ``CheckpointStore`` prepares.

Each write to the checkpoint row is a lightweight transaction whose condition is the
fence (owner, epoch, the batch id before it); keeping the statements in one place
makes those conditions readable side by side, and lets tools (``bench.commit_tail``)
run the store's own commit. The tables they address are in ``checkpoint_schema``.
"""

from __future__ import annotations

LOAD = """SELECT format, epoch, owner, batch_id, offsets, code_version, released, planned_id,
    planned, write_version, applied_resets, letters_durable, event_watermark
    FROM {ks}.checkpoints WHERE pipeline = ?"""


def statements(ks: str) -> dict[str, str]:
    return {
        "insert": f"""INSERT INTO {ks}.checkpoints (pipeline, format, epoch, owner, batch_id,
            offsets, code_version, updated_at, released) VALUES (?, ?, ?, ?, ?, ?, ?, ?, false)
            IF NOT EXISTS""",
        "claim": f"""UPDATE {ks}.checkpoints SET epoch = ?, owner = ?, updated_at = ?,
            released = false WHERE pipeline = ? IF epoch < ?""",
        "plan": f"""UPDATE {ks}.checkpoints SET planned_id = ?, planned = ?
            WHERE pipeline = ? IF owner = ? AND epoch = ? AND batch_id = ?""",
        "letters": f"""UPDATE {ks}.checkpoints SET letters_durable = ? WHERE pipeline = ?
            IF owner = ? AND epoch = ? AND batch_id = ? AND planned_id = ?""",
        "commit": f"""UPDATE {ks}.checkpoints SET batch_id = ?, offsets = ?, code_version = ?,
            updated_at = ?, last_ranges = ?, last_records = ?, last_started_at = ?,
            write_version = ?, event_watermark = ?, planned_id = null, planned = null,
            last_reset = null WHERE pipeline = ? IF owner = ? AND epoch = ? AND batch_id = ?""",
        "reset": f"""UPDATE {ks}.checkpoints SET batch_id = ?, offsets = ?, code_version = ?,
            updated_at = ?, last_ranges = '{{}}', last_records = 0, last_started_at = ?,
            write_version = ?, planned_id = null, planned = null, last_reset = ?,
            applied_resets = applied_resets + ?
            WHERE pipeline = ? IF owner = ? AND epoch = ? AND batch_id = ?""",
        "release": f"""UPDATE {ks}.checkpoints SET released = true, updated_at = ?
            WHERE pipeline = ? IF owner = ? AND epoch = ?""",
        "load": LOAD.format(ks=ks),
        "load_serial": LOAD.format(ks=ks),
        "claim_log": f"""INSERT INTO {ks}.claims (pipeline, epoch, owner, code_version,
            batch_id_at_claim, claimed_at) VALUES (?, ?, ?, ?, ?, ?)""",
        "history_insert": f"""INSERT INTO {ks}.batches (pipeline, batch_id, epoch, owner,
            code_version, ranges, records, started_at, committed_at, lost, reset) VALUES
            (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?""",
        "history": f"SELECT * FROM {ks}.batches WHERE pipeline = ? LIMIT ?",
        "history_row": f"SELECT * FROM {ks}.batches WHERE pipeline = ? AND batch_id = ?",
        "adoption_load": f"""SELECT format, epoch, owner, batch_id, offsets, code_version,
            planned_id, planned, last_ranges, last_records, last_started_at, write_version,
            applied_resets, last_reset, adopted_by FROM {ks}.checkpoints WHERE pipeline = ?""",
        "legacy_fence": f"""UPDATE {ks}.checkpoints SET epoch = ?, owner = ?, adopted_by = ?,
            updated_at = ? WHERE pipeline = ? IF epoch < ? AND adopted_by = ?""",
        "adopt": f"""INSERT INTO {ks}.checkpoints (pipeline, format, epoch, owner, batch_id,
            offsets, code_version, updated_at, released, planned_id, planned, last_ranges,
            last_records, last_started_at, write_version, applied_resets, last_reset,
            adopted_from) VALUES (?, ?, ?, ?, ?, ?, ?, ?, false, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            IF NOT EXISTS""",
        "last_batch": f"""SELECT batch_id, epoch, owner, code_version, updated_at, last_ranges,
            last_records, last_started_at, last_reset FROM {ks}.checkpoints WHERE pipeline = ?""",
    }
