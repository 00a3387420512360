WITH packed AS
  (SELECT pid,
          array(CAST(`now` AS BIGINT),
            CAST(`H` AS BIGINT), CAST(`T` AS BIGINT), CAST(`tc_retention` AS BIGINT),
            CAST(`tc_max_time` AS BIGINT), CAST(`tc_ttl` AS BIGINT), CAST(`tc_backlog_age` AS BIGINT), CAST(`segment_roll` AS BIGINT),
            CAST(`retention_time` AS BIGINT), CAST(`retention_size` AS BIGINT), CAST(`max_time` AS BIGINT),
            CAST(`max_partition_size` AS BIGINT), CAST(`subscription_expiry` AS BIGINT), CAST(`message_ttl` AS BIGINT),
            CAST(`backlog_size` AS BIGINT), CAST(`backlog_age` AS BIGINT), CAST(`max_deletes_per_cycle` AS BIGINT),
            CAST(`hold` AS BIGINT), CAST(`message` AS BIGINT), CAST(`protect` AS BIGINT), CAST(`evicting` AS BIGINT)) AS facts
   FROM {facts}), rows AS
  (SELECT `pid`, `row`, `base_offset`, `next_offset`, `size_bytes`, `max_timestamp`, `sealed`, `gid`, `kind`,
          `position`, `group_last_commit`, `suffix_after`, `rn`,
          CASE WHEN `row` = 1
                   AND NOT sealed
                   AND size_bytes > 0 THEN first_timestamp
          END AS active_first_ts
   FROM {rows}), level_one AS
  (SELECT `pid`, `base_offset`, `next_offset`, `size_bytes`, `gid`, `position`, `rn`, `flags`, `eligible_at`,
          min(holding) OVER whole AS behind, max(active_first_ts) OVER whole AS active_first_ts, min(fn_target) OVER whole AS fn_target,
          min(fn_size) OVER whole AS fn_size, min(fn_hard) OVER whole AS fn_hard, min(fn_max_size) OVER whole AS fn_max_size,
          min(fits_quota) OVER whole AS fits_quota
   FROM
     (SELECT `pid`, `row`, `base_offset`, `next_offset`, `size_bytes`, `max_timestamp`, `sealed`, `gid`, `kind`,
             `position`, `group_last_commit`, `suffix_after`, `rn`, `active_first_ts`,
             CASE WHEN `row` = 1 THEN 1 ELSE 0
             END + CASE WHEN `row` = 2 THEN 2 ELSE 0
                   END + CASE WHEN coalesce(`row` = 1
                                            AND sealed, false) THEN 4 ELSE 0
                         END + CASE WHEN coalesce(`row` = 2
                                                  AND kind = 'subscriber', false) THEN 8 ELSE 0
                               END + CASE
                                         WHEN coalesce(now - group_last_commit > subscription_expiry,
                                                false) THEN 16 ELSE 0
                                     END + CASE
                                               WHEN coalesce(coalesce(`row` = 1
                                                                      AND sealed,
                                                               false)
                                                             AND max_timestamp < now - retention_time,
                                                      false) THEN 32 ELSE 0
                                           END + CASE
                                                     WHEN coalesce(coalesce(`row` = 1
                                                                            AND sealed,
                                                                     false)
                                                                   AND suffix_after >= retention_size,
                                                            false) THEN 64 ELSE 0
                                                 END + CASE
                                                           WHEN coalesce(coalesce(`row` = 1
                                                                                  AND sealed,
                                                                           false)
                                                                         AND max_timestamp < now - max_time,
                                                                  false) THEN 128 ELSE 0
                                                       END + CASE
                                                                 WHEN coalesce(coalesce(`row` = 1
                                                                                        AND sealed,
                                                                                 false)
                                                                               AND suffix_after + size_bytes > max_partition_size,
                                                                        false) THEN 256 ELSE 0
                                                             END + CASE
                                                                       WHEN coalesce(retention_time IS NOT NULL
                                                                                     AND max_timestamp > now,
                                                                              false) THEN 512 ELSE 0
                                                                   END AS flags,
                                                                   CASE
                                                                       WHEN coalesce(`row` = 1
                                                                                     AND sealed,
                                                                              false) THEN least(max_timestamp + retention_time + 1,

                                                                                            max_timestamp + max_time + 1)
                                                                   END AS eligible_at,
                                                                   CASE
                                                                       WHEN coalesce(`row` = 2
                                                                                     AND kind = 'subscriber',
                                                                              false)
                                                                            AND NOT coalesce(now - group_last_commit > subscription_expiry,
                                                                                      false)
                                                                            AND protect THEN named_struct('pos',

                                                                                               CASE
                                                                                                   WHEN coalesce(`row` = 2
                                                                                                                 AND kind = 'subscriber',

                                                                                                          false)
                                                                                                        AND message_ttl IS NOT NULL THEN greatest(greatest(`position`,

                                                                                                                                                    H),

                                                                                                                                           tc_ttl)
                                                                                                   ELSE greatest(`position`,

                                                                                                          H)
                                                                                               END, 'gid', gid)
                                                                   END AS holding,
                                                                   CASE
                                                                       WHEN coalesce(`row` = 1
                                                                                     AND next_offset > H,
                                                                              false)
                                                                            AND NOT (coalesce(coalesce(`row` = 1
                                                                                                       AND sealed,
                                                                                                false)
                                                                                              AND max_timestamp < now - retention_time,
                                                                                       false)
                                                                                     OR coalesce(coalesce(`row` = 1
                                                                                                          AND sealed,
                                                                                                   false)
                                                                                                 AND suffix_after >= retention_size,
                                                                                          false)) THEN base_offset
                                                                   END AS fn_target,
                                                                   CASE
                                                                       WHEN coalesce(`row` = 1
                                                                                     AND next_offset > H,
                                                                              false)
                                                                            AND NOT coalesce(coalesce(`row` = 1
                                                                                                      AND sealed,
                                                                                               false)
                                                                                             AND suffix_after >= retention_size,
                                                                                      false) THEN base_offset
                                                                   END AS fn_size,
                                                                   CASE
                                                                       WHEN coalesce(`row` = 1
                                                                                     AND next_offset > H,
                                                                              false)
                                                                            AND NOT (coalesce(coalesce(`row` = 1
                                                                                                       AND sealed,
                                                                                                false)
                                                                                              AND max_timestamp < now - max_time,
                                                                                       false)
                                                                                     OR coalesce(coalesce(`row` = 1
                                                                                                          AND sealed,
                                                                                                   false)
                                                                                                 AND suffix_after + size_bytes > max_partition_size,
                                                                                          false)) THEN base_offset
                                                                   END AS fn_hard,
                                                                   CASE
                                                                       WHEN coalesce(`row` = 1
                                                                                     AND next_offset > H,
                                                                              false)
                                                                            AND NOT coalesce(coalesce(`row` = 1
                                                                                                      AND sealed,
                                                                                               false)
                                                                                             AND suffix_after + size_bytes > max_partition_size,
                                                                                      false) THEN base_offset
                                                                   END AS fn_max_size,
                                                                   CASE
                                                                       WHEN `row` = 1
                                                                            AND suffix_after + size_bytes <= backlog_size THEN base_offset
                                                                   END AS fits_quota
      FROM
        (SELECT /*+ BROADCAST(f) */ s.*, CAST(f.facts[0] AS BIGINT) AS `now`, CAST(f.facts[1] AS BIGINT) AS `H`,
                                    CAST(f.facts[2] AS BIGINT) AS `T`, CAST(f.facts[3] AS BIGINT) AS `tc_retention`,
                                    CAST(f.facts[4] AS BIGINT) AS `tc_max_time`, CAST(f.facts[5] AS BIGINT) AS `tc_ttl`,
                                    CAST(f.facts[6] AS BIGINT) AS `tc_backlog_age`, CAST(f.facts[7] AS BIGINT) AS `segment_roll`,
                                    CAST(f.facts[8] AS BIGINT) AS `retention_time`, CAST(f.facts[9] AS BIGINT) AS `retention_size`,
                                    CAST(f.facts[10] AS BIGINT) AS `max_time`, CAST(f.facts[11] AS BIGINT) AS `max_partition_size`,
                                    CAST(f.facts[12] AS BIGINT) AS `subscription_expiry`, CAST(f.facts[13] AS BIGINT) AS `message_ttl`,
                                    CAST(f.facts[14] AS BIGINT) AS `backlog_size`, CAST(f.facts[15] AS BIGINT) AS `backlog_age`,
                                    CAST(f.facts[16] AS BIGINT) AS `max_deletes_per_cycle`, CAST(f.facts[17] AS BOOLEAN) AS `hold`,
                                    CAST(f.facts[18] AS BOOLEAN) AS `message`, CAST(f.facts[19] AS BOOLEAN) AS `protect`,
                                    CAST(f.facts[20] AS BOOLEAN) AS `evicting`
         FROM rows s
         JOIN packed f ON s.pid = f.pid)) WINDOW whole AS (PARTITION BY pid)),
                 limits AS
  (SELECT *,
          CASE
              WHEN behind.pos IS NOT NULL
                   AND evicting THEN greatest(behind.pos,

                                       CASE
                                           WHEN backlog_size IS NOT NULL THEN coalesce(fits_quota,
                                                                                T)
                                       END, CASE WHEN backlog_age IS NOT NULL THEN tc_backlog_age
                                            END) ELSE behind.pos
          END AS barrier,
          CASE
              WHEN message THEN greatest(CASE WHEN retention_time IS NOT NULL THEN tc_retention ELSE H
                                         END,
                                  greatest(H,
                                    coalesce(fn_size, T))) ELSE greatest(H,
                                                                  coalesce(fn_target,
                                                                    T))
          END AS target,
          CASE
              WHEN message THEN greatest(CASE WHEN max_time IS NOT NULL THEN tc_max_time ELSE H
                                         END,
                                  greatest(H,
                                    coalesce(fn_max_size, T))) ELSE greatest(H,
                                                                      coalesce(fn_hard,
                                                                        T))
          END AS hard
   FROM
     (SELECT /*+ BROADCAST(f) */ s.*, CAST(f.facts[0] AS BIGINT) AS `now`, CAST(f.facts[1] AS BIGINT) AS `H`,
                                 CAST(f.facts[2] AS BIGINT) AS `T`, CAST(f.facts[3] AS BIGINT) AS `tc_retention`,
                                 CAST(f.facts[4] AS BIGINT) AS `tc_max_time`, CAST(f.facts[5] AS BIGINT) AS `tc_ttl`,
                                 CAST(f.facts[6] AS BIGINT) AS `tc_backlog_age`, CAST(f.facts[7] AS BIGINT) AS `segment_roll`,
                                 CAST(f.facts[8] AS BIGINT) AS `retention_time`, CAST(f.facts[9] AS BIGINT) AS `retention_size`,
                                 CAST(f.facts[10] AS BIGINT) AS `max_time`, CAST(f.facts[11] AS BIGINT) AS `max_partition_size`,
                                 CAST(f.facts[12] AS BIGINT) AS `subscription_expiry`, CAST(f.facts[13] AS BIGINT) AS `message_ttl`,
                                 CAST(f.facts[14] AS BIGINT) AS `backlog_size`, CAST(f.facts[15] AS BIGINT) AS `backlog_age`,
                                 CAST(f.facts[16] AS BIGINT) AS `max_deletes_per_cycle`, CAST(f.facts[17] AS BOOLEAN) AS `hold`,
                                 CAST(f.facts[18] AS BOOLEAN) AS `message`, CAST(f.facts[19] AS BOOLEAN) AS `protect`,
                                 CAST(f.facts[20] AS BOOLEAN) AS `evicting`
      FROM level_one s
      JOIN packed f ON s.pid = f.pid)),
                 cuts AS
  (SELECT *, least(T, greatest(H, hard, least(target, barrier))) AS cut
   FROM limits),
                 chosen AS
  (SELECT *, coalesce(((flags & 4) <> 0)
                      AND NOT hold
                      AND next_offset <= cut, false) AS wanted,
          coalesce(((flags & 4) <> 0)
                   AND NOT hold
                   AND next_offset <= cut, false)
   AND coalesce(rn <= coalesce(max_deletes_per_cycle, 4611686018427387904), false) AS deleted
   FROM cuts),
                 decided AS
  (SELECT `pid`, `gid`, `position`, `rn`, `flags`, `eligible_at`,
          coalesce(now - active_first_ts >= segment_roll, false) AS roll, barrier, behind.gid AS barrier_group, cut, wanted, deleted, base_offset, next_offset, size_bytes,
          CASE
              WHEN deleted THEN CASE WHEN next_offset <= H THEN 0
                                    WHEN next_offset <= least(target,
                                                          barrier)
                                         AND CASE
                                                 WHEN message THEN coalesce(next_offset <= tc_retention,
                                                                     false) ELSE ((flags & 32) <> 0)
                                             END THEN 1 WHEN next_offset <= least(target,
                                                                              barrier) THEN 2
                                    WHEN CASE
                                             WHEN message THEN coalesce(next_offset <= tc_max_time,
                                                                 false) ELSE ((flags & 128) <> 0)
                                         END THEN 3 ELSE 4
                                END
              ELSE CASE WHEN hold THEN 5 WHEN NOT ((flags & 4) <> 0) THEN 6 WHEN wanted THEN 7 WHEN next_offset <= target
                            AND coalesce(next_offset > barrier, false) THEN 8
                       WHEN ((flags & 32) <> 0)
                            OR ((flags & 64) <> 0)
                            OR ((flags & 128) <> 0)
                            OR ((flags & 256) <> 0) THEN 9 WHEN ((flags & 512) <> 0) THEN 10 WHEN retention_time IS NOT NULL THEN 11 WHEN retention_size IS NOT NULL THEN 12 ELSE 13
                   END
          END AS reason_code,
          CASE
              WHEN ((flags & 8) <> 0)
                   AND evicting THEN greatest(CASE
                                                  WHEN ((flags & 8) <> 0)
                                                       AND message_ttl IS NOT NULL THEN greatest(greatest(`position`,
                                                                                                   H),
                                                                                          tc_ttl) ELSE greatest(`position`,

                                                                                                         H)
                                              END,

                                       CASE
                                           WHEN backlog_size IS NOT NULL THEN coalesce(fits_quota,
                                                                                T)
                                       END, CASE WHEN backlog_age IS NOT NULL THEN tc_backlog_age
                                            END)
              ELSE CASE
                       WHEN ((flags & 8) <> 0)
                            AND message_ttl IS NOT NULL THEN greatest(greatest(`position`,
                                                                        H),
                                                               tc_ttl) ELSE greatest(`position`,
                                                                              H)
                   END
          END AS pos_new, NOT ((flags & 16) <> 0)
   AND coalesce(((flags & 8) <> 0)
                AND backlog_size IS NOT NULL
                AND CASE
                        WHEN ((flags & 8) <> 0)
                             AND message_ttl IS NOT NULL THEN greatest(greatest(`position`,
                                                                         H),
                                                                tc_ttl) ELSE greatest(`position`,
                                                                               H)
                    END < coalesce(fits_quota, T), false) AS over_backlog_size, NOT ((flags & 16) <> 0)
   AND coalesce(((flags & 8) <> 0)
                AND CASE
                        WHEN ((flags & 8) <> 0)
                             AND message_ttl IS NOT NULL THEN greatest(greatest(`position`,
                                                                         H),
                                                                tc_ttl) ELSE greatest(`position`,
                                                                               H)
                    END < tc_backlog_age, false) AS over_backlog_age
   FROM chosen),
                 level_two AS
  (SELECT *, max(CASE WHEN deleted THEN next_offset
                 END) OVER whole AS last_deleted_next,
          min(CASE WHEN wanted
                       AND NOT deleted THEN base_offset
              END) OVER whole AS first_kept_by_budget, count(CASE WHEN deleted THEN true
                                                             END) OVER whole AS segments_deleted,
          coalesce(sum(CASE WHEN deleted THEN size_bytes
                       END) OVER whole, 0) AS bytes_deleted
   FROM decided WINDOW whole AS (PARTITION BY pid)), final AS
  (SELECT *,
          CASE WHEN hold THEN H WHEN message THEN greatest(H,
                                                    least(cut,
                                                      first_kept_by_budget)) ELSE greatest(H,

                                                                                    coalesce(last_deleted_next,
                                                                                      H))
          END AS new_log_start_offset
   FROM
     (SELECT /*+ BROADCAST(f) */ s.*, CAST(f.facts[0] AS BIGINT) AS `now`, CAST(f.facts[1] AS BIGINT) AS `H`,
                                 CAST(f.facts[2] AS BIGINT) AS `T`, CAST(f.facts[3] AS BIGINT) AS `tc_retention`,
                                 CAST(f.facts[4] AS BIGINT) AS `tc_max_time`, CAST(f.facts[5] AS BIGINT) AS `tc_ttl`,
                                 CAST(f.facts[6] AS BIGINT) AS `tc_backlog_age`, CAST(f.facts[7] AS BIGINT) AS `segment_roll`,
                                 CAST(f.facts[8] AS BIGINT) AS `retention_time`, CAST(f.facts[9] AS BIGINT) AS `retention_size`,
                                 CAST(f.facts[10] AS BIGINT) AS `max_time`, CAST(f.facts[11] AS BIGINT) AS `max_partition_size`,
                                 CAST(f.facts[12] AS BIGINT) AS `subscription_expiry`, CAST(f.facts[13] AS BIGINT) AS `message_ttl`,
                                 CAST(f.facts[14] AS BIGINT) AS `backlog_size`, CAST(f.facts[15] AS BIGINT) AS `backlog_age`,
                                 CAST(f.facts[16] AS BIGINT) AS `max_deletes_per_cycle`, CAST(f.facts[17] AS BOOLEAN) AS `hold`,
                                 CAST(f.facts[18] AS BOOLEAN) AS `message`, CAST(f.facts[19] AS BOOLEAN) AS `protect`,
                                 CAST(f.facts[20] AS BOOLEAN) AS `evicting`
      FROM level_two s
      JOIN packed f ON s.pid = f.pid))
SELECT CAST(CASE WHEN ((flags & 1) <> 0) THEN 1 WHEN ((flags & 2) <> 0) THEN 2 ELSE 0
            END AS TINYINT) AS `row`, CAST(pid AS INT) AS pid, CAST(CASE
                                                                        WHEN ((flags & 1) <> 0) THEN rn
                                                                    END AS INT) AS rn,
       CAST(CASE WHEN ((flags & 1) <> 0) THEN reason_code
            END AS TINYINT) AS reason_code, CASE WHEN ((flags & 1) <> 0) THEN eligible_at
                                            END AS eligible_at,
       CASE
           WHEN ((flags & 2) <> 0) THEN array(CAST(`gid` AS BIGINT),
                                          CAST(((flags & 8) <> 0) AS BIGINT),
                                          CAST(`position` AS BIGINT),
                                          CAST(CASE
                                                   WHEN NOT ((flags & 16) <> 0) THEN greatest(pos_new,

                                                                                       new_log_start_offset) ELSE `position`
                                               END AS BIGINT), CAST(((flags & 16) <> 0) AS BIGINT),
                                          CAST(CASE
                                                   WHEN NOT ((flags & 16) <> 0) THEN CASE
                                                                                         WHEN ((flags & 8) <> 0)
                                                                                              AND message_ttl IS NOT NULL THEN greatest(greatest(`position`,

                                                                                                                                          H),

                                                                                                                                 tc_ttl)
                                                                                         ELSE greatest(`position`,
                                                                                                H)
                                                                                     END - greatest(`position`,
                                                                                             H) ELSE 0
                                               END AS BIGINT),
                                          CAST(CASE
                                                   WHEN NOT ((flags & 16) <> 0) THEN pos_new - CASE
                                                                                                   WHEN ((flags & 8) <> 0)
                                                                                                        AND message_ttl IS NOT NULL THEN greatest(greatest(`position`,

                                                                                                                                                    H),

                                                                                                                                           tc_ttl)
                                                                                                   ELSE greatest(`position`,

                                                                                                          H)
                                                                                               END ELSE 0
                                               END AS BIGINT),
                                          CAST(CASE
                                                   WHEN NOT ((flags & 16) <> 0) THEN CASE
                                                                                         WHEN NOT ((flags & 16) <> 0) THEN greatest(pos_new,

                                                                                                                             new_log_start_offset)
                                                                                         ELSE `position`
                                                                                     END - pos_new ELSE 0
                                               END AS BIGINT), CAST(`over_backlog_size` AS BIGINT),
                                          CAST(`over_backlog_age` AS BIGINT),
                                          CAST((over_backlog_size
                                                OR over_backlog_age)
                                               AND NOT evicting AS BIGINT))
           WHEN NOT ((flags & 1) <> 0) THEN array(CAST(`H` AS BIGINT),
                                              CAST(`new_log_start_offset` AS BIGINT),
                                              CAST(`T` AS BIGINT), CAST(`roll` AS BIGINT), CAST(`barrier` AS BIGINT),
                                              CAST(`barrier_group` AS BIGINT), CAST(`segments_deleted` AS BIGINT),
                                              CAST(`bytes_deleted` AS BIGINT))
       END AS numbers
FROM final
