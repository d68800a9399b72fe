// Forms generated from a field table (see field_form.h).
#include "views/field_form.h"

#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>

#include "engine/config_fields.h"
#include "experiments/study_design.h"
#include "experiments/study_fields.h"

namespace app {

namespace {

QString kindName(engine::ConfigFieldInfo::Kind kind) {
    switch (kind) {
        case engine::ConfigFieldInfo::Kind::kBool: return "bool";
        case engine::ConfigFieldInfo::Kind::kInteger: return "integer";
        case engine::ConfigFieldInfo::Kind::kNumber: return "number";
        default: return "text";
    }
}

bool startsWithAny(const QString& key, const QStringList& prefixes) {
    for (const QString& p : prefixes)
        if (p.isEmpty() ? !key.contains('.') : key.startsWith(p)) return true;
    return false;
}

// "\"a b\"" -> "a b"; other text as it is.
QString unquoted(QString s) {
    s = s.trimmed();
    if (s.size() >= 2 && s.startsWith('"') && s.endsWith('"')) {
        s = s.mid(1, s.size() - 2);
        s.replace("\\\"", "\"").replace("\\\\", "\\");
    }
    return s;
}

}  // namespace

std::vector<FieldSpec> configFieldSpecs(
    const QStringList& prefixes, const QStringList& skip,
    std::function<QString(const QString&, const QString&)> check) {
    std::vector<FieldSpec> out;
    for (const auto& f : engine::config_field_infos()) {
        const QString key = QString::fromStdString(f.key);
        if (!startsWithAny(key, prefixes) || skip.contains(key)) continue;
        FieldSpec s;
        s.key = key;
        s.kind = kindName(f.kind);
        s.defaultText = QString::fromStdString(f.default_text);
        s.doc = QString::fromStdString(f.doc);
        for (const auto& c : f.choices) s.choices << QString::fromStdString(c);
        if (check) s.check = [check, key](const QString& v) { return check(key, v); };
        out.push_back(s);
    }
    return out;
}

std::vector<FieldSpec> studyFieldSpecs(const QStringList& prefixes, const QStringList& skip) {
    std::vector<FieldSpec> out;
    for (const auto& f : experiments::study_field_infos()) {
        const QString key = QString::fromStdString(f.key);
        if (f.kind.empty() || !startsWithAny(key, prefixes) || skip.contains(key)) continue;
        FieldSpec s;
        s.key = key;
        s.kind = QString::fromStdString(f.kind);
        s.defaultText = QString::fromStdString(f.default_text);
        s.doc = QString::fromStdString(f.doc);
        for (const auto& c : f.choices) s.choices << QString::fromStdString(c);
        out.push_back(s);
    }
    for (auto& s : out) {
        const bool list = s.kind.startsWith("list of");
        const std::string key = s.key.toStdString();
        s.check = [list, key](const QString& v) {
            const QString yaml = list ? "[" + v + "]" : v;
            return QString::fromStdString(experiments::check_study_value(key, yaml.toStdString()));
        };
    }
    return out;
}

FieldEditor::FieldEditor(const FieldSpec& spec, QWidget* parent) : QWidget(parent), spec_(spec) {
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    const QString tip =
        "<b>" + spec.key + "</b> (" + spec.kind + ")<br>" + spec.doc.toHtmlEscaped() +
        (spec.defaultText.isEmpty() ? QString()
                                    : "<br>default: " + spec.defaultText.toHtmlEscaped());
    if (spec.kind == "bool" || !spec.choices.isEmpty()) {
        box_ = new QComboBox;
        box_->addItem("default (" + spec.defaultText + ")", QString());
        const QStringList values =
            spec.kind == "bool" ? QStringList{"true", "false"} : spec.choices;
        for (const QString& v : values) box_->addItem(v, v);
        box_->setToolTip(tip);
        layout->addWidget(box_);
        connect(box_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this] {
            validate();
            emit edited();
        });
    } else {
        line_ = new QLineEdit;
        line_->setPlaceholderText(spec.defaultText.isEmpty() ? QString("(not set)")
                                                             : "default: " + spec.defaultText);
        line_->setToolTip(tip);
        layout->addWidget(line_);
        connect(line_, &QLineEdit::textEdited, this, [this] {
            validate();
            emit edited();
        });
    }
    setToolTip(tip);
}

QWidget* FieldEditor::input() const {
    return box_ ? static_cast<QWidget*>(box_) : static_cast<QWidget*>(line_);
}

QString FieldEditor::text() const {
    return box_ ? box_->currentData().toString() : line_->text().trimmed();
}

void FieldEditor::setText(const QString& text) {
    if (box_) {
        int i = box_->findData(text);
        if (i < 0 && !text.isEmpty()) {
            box_->addItem(text, text);  // a value outside the set: shown, and checked
            i = box_->count() - 1;
        }
        box_->setCurrentIndex(std::max(0, i));
    } else {
        line_->setText(text);
    }
    validate();
}

QString FieldEditor::yamlText() const {
    const QString t = text();
    if (t.isEmpty()) return {};
    if (spec_.kind.startsWith("list of")) {
        QStringList items;
        for (const QString& item : t.split(',', Qt::SkipEmptyParts))
            items << QString::fromStdString(
                experiments::yaml_scalar_text(item.trimmed().toStdString()));
        return "[" + items.join(", ") + "]";
    }
    return spec_.kind == "text"
               ? QString::fromStdString(experiments::yaml_scalar_text(t.toStdString()))
               : t;
}

void FieldEditor::setYamlText(const QString& yaml) {
    QString t = yaml.trimmed();
    if (spec_.kind.startsWith("list of") && t.startsWith('[') && t.endsWith(']')) {
        QStringList items;
        for (const QString& item : t.mid(1, t.size() - 2).split(',', Qt::SkipEmptyParts))
            items << unquoted(item);
        t = items.join(", ");
    } else {
        t = unquoted(t);
    }
    setText(t);
}

QString FieldEditor::validate() {
    const QString t = text();
    const QString message = t.isEmpty() || !spec_.check ? QString() : spec_.check(t);
    QWidget* w = input();
    w->setStyleSheet(message.isEmpty() ? QString() : "background: #fde2e1;");
    w->setToolTip(message.isEmpty() ? toolTip() : message + "<hr>" + toolTip());
    w->setProperty("error", message);
    return message;
}

FieldForm::FieldForm(const std::vector<FieldSpec>& specs, QWidget* parent) : QWidget(parent) {
    auto* form = new QFormLayout(this);
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    for (const FieldSpec& s : specs) {
        auto* e = new FieldEditor(s);
        e->setObjectName(s.key);
        auto* label = new QLabel(s.key);
        label->setToolTip(e->toolTip());
        form->addRow(label, e);
        editors_[s.key] = e;
        order_ << s.key;
        connect(e, &FieldEditor::edited, this, &FieldForm::edited);
    }
}

FieldEditor* FieldForm::editor(const QString& key) const {
    const auto it = editors_.find(key);
    return it == editors_.end() ? nullptr : it->second;
}

std::vector<std::pair<QString, QString>> FieldForm::values() const {
    std::vector<std::pair<QString, QString>> out;
    for (const QString& key : order_)
        if (const QString v = editors_.at(key)->text(); !v.isEmpty()) out.emplace_back(key, v);
    return out;
}

void FieldForm::clear() {
    for (auto& [key, e] : editors_) {
        const QSignalBlocker block(e);
        e->setText({});
    }
}

QStringList FieldForm::validate() {
    QStringList out;
    for (const QString& key : order_)
        if (const QString m = editors_.at(key)->validate(); !m.isEmpty()) out << key + ": " + m;
    return out;
}

}  // namespace app
