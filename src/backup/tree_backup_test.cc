#include "backup/tree_backup.h"
