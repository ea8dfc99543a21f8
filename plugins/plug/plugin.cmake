# plug: sources linked into proxyd_core.
list(APPEND PX_PLUGIN_SOURCES ${CMAKE_CURRENT_LIST_DIR}/plug.c)
