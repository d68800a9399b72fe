// Forms generated from a field table: one editor per row of the pretraining config's table
// (engine/config_fields.h) or the study file's (experiments/study_fields.h), never one written by
// hand per field. A row's kind picks the editor (a list for true/false and closed sets, a line
// for the rest, "a, b" for lists), its documentation is the tooltip, its default the
// placeholder, and every value is checked as the loader checks it, the message shown at the
// field. Nothing set means the default: the file holds only overrides.
#pragma once

#include <QComboBox>
#include <QLineEdit>
#include <QStringList>
#include <QWidget>
#include <functional>
#include <map>
#include <vector>

namespace app {

/// One row of a generated form.
struct FieldSpec {
    QString key;          ///< "model.hidden_size", "finetune.lrs"
    QString kind;         ///< "text", "bool", "integer", "number", or "list of ..."
    QString defaultText;  ///< shown when nothing is set
    QString doc;          ///< the tooltip
    QStringList choices;  ///< a closed set (a list box), else typed
    /// "" or the loader's message for a value (as the editor's text() gives it).
    std::function<QString(const QString&)> check;
};

/// The pretraining config's rows whose keys start with one of `prefixes`, except `skip`;
/// `base` gives the config a value is checked on top of.
std::vector<FieldSpec> configFieldSpecs(
    const QStringList& prefixes, const QStringList& skip,
    std::function<QString(const QString&, const QString&)> check);

/// The study file's rows whose keys start with one of `prefixes` ("" for the top level's
/// keys), except `skip`; each checked by experiments::check_study_value.
std::vector<FieldSpec> studyFieldSpecs(const QStringList& prefixes, const QStringList& skip);

/// The editor of one field.
class FieldEditor : public QWidget {
    Q_OBJECT
  public:
    FieldEditor(const FieldSpec& spec, QWidget* parent = nullptr);
    const FieldSpec& spec() const { return spec_; }
    /// The value as typed ("" = not set): "2e-3", "true", "1e-3, 2e-3".
    QString text() const;
    void setText(const QString& text);
    /// The value as YAML ("" = not set): lists in brackets, text quoted where YAML needs it.
    QString yamlText() const;
    /// Sets the value from its YAML text ("[1e-3, 2e-3]", "\"a b\"").
    void setYamlText(const QString& yaml);
    /// Checks the value, marks the editor and returns the message ("" when it is fine).
    QString validate();
    QWidget* input() const;

  signals:
    void edited();

  private:
    FieldSpec spec_;
    QComboBox* box_ = nullptr;
    QLineEdit* line_ = nullptr;
};

/// A form of FieldEditors, labelled by key, in the order given.
class FieldForm : public QWidget {
    Q_OBJECT
  public:
    explicit FieldForm(const std::vector<FieldSpec>& specs, QWidget* parent = nullptr);
    FieldEditor* editor(const QString& key) const;
    QStringList keys() const { return order_; }
    /// (key, value as typed) of every field that is set, in form order.
    std::vector<std::pair<QString, QString>> values() const;
    /// Clears every field (all defaults).
    void clear();
    /// Validates every field; the messages of those that fail, "key: message".
    QStringList validate();

  signals:
    void edited();

  private:
    std::map<QString, FieldEditor*> editors_;
    QStringList order_;
};

}  // namespace app
