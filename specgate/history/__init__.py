"""Results over time: every completed gate run's figures kept per config and figure
(`records.py`), the steps and slow creeps in them (`changes.py`), a static trend page and chart
(`trend.py`), where one run stands in its history (`standing.py`), and two report folders
compared (`compare.py`). docs/history.md says how to keep the history in CI."""
